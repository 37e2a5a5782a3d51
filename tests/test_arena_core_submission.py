"""Arena submissions: folder checks, and every kind of bad method rejected with its reason, without a hang."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.sandbox import Limits, MethodSandbox, validate_indices, validate_scores

ASSETS = Path(__file__).parent / "assets" / "arena"
FRC = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "frc"
H, L, D, W, BUDGET = 2, 48, 8, 8, 12


def layer_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"keys": rng.standard_normal((H, L, D)).astype(np.float32),
            "values": rng.standard_normal((H, L, D)).astype(np.float32),
            "queries": rng.standard_normal((2 * H, W, D)).astype(np.float32),
            "positions": np.arange(L, dtype=np.int64)}


def run_once(name: str, **limits) -> np.ndarray:
    sub = load_submission(ASSETS / name)
    with MethodSandbox(sub, Limits.of(**limits)) as box:
        return box.answer(layer_arrays(), budget=BUDGET, layer=0, n_layers=1, compression_ratio=0.75)


@pytest.mark.parametrize(("folder", "kind", "says"), [
    ("missing_method", "missing_file", "method.py"),
    ("missing_description", "missing_file", "DESCRIPTION.md"),
    ("missing_sections", "bad_description", "Relation to prior work"),
    ("bad_metadata", "bad_metadata", "lowercase"),
    ("no_hook", "bad_method", "score(layer)"),
    ("imports_socket", "network", "socket"),
    ("imports_os", "file_access", "os"),
])
def test_folder_checks_name_the_problem(folder, kind, says):
    with pytest.raises(SubmissionError) as err:
        load_submission(ASSETS / folder)
    assert err.value.kind == kind and says in str(err.value)


def test_good_submissions_load():
    assert load_submission(ASSETS / "good_scores").returns == "scores"
    assert load_submission(ASSETS / "good_keep").returns == "indices"
    frc = load_submission(FRC)
    assert (frc.name, frc.returns) == ("frc", "scores") and "A" in frc.boards and len(frc.code_sha256) == 64


def test_good_methods_answer_validated():
    arrays = layer_arrays()
    scores = run_once("good_scores")
    np.testing.assert_allclose(scores, np.linalg.norm(arrays["keys"], axis=-1), rtol=1e-6)
    kept = run_once("good_keep")
    assert kept.shape == (H, BUDGET) and (kept == np.arange(BUDGET)).all()  # sorted, the same for every head


@pytest.mark.parametrize(("folder", "kind"), [
    ("crash", "crash"),
    ("crash_on_load", "crash"),
    ("over_budget", "over_budget"),
    ("duplicates", "duplicate_indices"),
    ("out_of_range", "out_of_range"),
    ("nan_scores", "bad_output"),
    ("wrong_shape", "bad_output"),
    ("reads_file", "file_access"),
    ("reads_file_quietly", "file_access"),  # catching the refusal does not hide it
    ("lists_dir", "file_access"),
    ("opens_socket", "network"),
    ("tampers", "tampering"),
    ("tampers_flags", "tampering"),
    ("swaps_inputs", "tampering"),
])
def test_bad_methods_rejected_with_their_kind(folder, kind):
    with pytest.raises(SubmissionError) as err:
        run_once(folder)
    assert err.value.kind == kind, str(err.value)


def test_hang_is_killed_after_its_cpu_limit():
    start = time.monotonic()
    with pytest.raises(SubmissionError) as err:
        run_once("hang", timeout_s=1.0)
    assert err.value.kind == "timeout" and time.monotonic() - start < 30


def test_memory_exhaustion_is_stopped():
    start = time.monotonic()
    with pytest.raises(SubmissionError) as err:
        run_once("memory", memory_mb=200)
    assert err.value.kind == "memory" and time.monotonic() - start < 30


def test_a_failed_child_is_retired_and_restarts_clean():
    sub = load_submission(ASSETS / "crash")
    box = MethodSandbox(sub).start()
    with pytest.raises(SubmissionError):
        box.call(layer_arrays(), budget=BUDGET, layer=0, n_layers=1, compression_ratio=0.75)
    assert not box.alive


def test_validators_refuse_what_the_child_might_forge():
    with pytest.raises(SubmissionError, match="integers"):
        validate_indices(np.array([0.5, 1.0]), H, L, BUDGET)
    with pytest.raises(SubmissionError) as err:
        validate_indices(np.zeros((H, 0), dtype=np.int64), H, L, BUDGET)
    assert err.value.kind == "bad_output"
    with pytest.raises(SubmissionError) as err:
        validate_scores(np.array([1e39] * L), H, L)  # finite in float64, inf in float32
    assert err.value.kind == "bad_output"
    kept = validate_indices(np.array([[3, 1], [0, 2]]), H, L, BUDGET)
    assert kept.tolist() == [[1, 3], [0, 2]]
