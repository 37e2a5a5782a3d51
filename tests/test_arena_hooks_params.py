"""Hook 4, ``params.npz``: a submission's fitted parameters reach its constructor read-only and change its
scores; files over the cap, with pickled objects, non-numeric or non-finite arrays are refused before anything
runs; the file's sha256 is part of the submission's identity, its ledger entry and the judges' bundle."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_arena_core_submission import BUDGET, layer_arrays

from cachecraft_lib.arena.judges.bundle import load_bundle
from cachecraft_lib.arena.submissions import params as params_mod
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.sandbox import Limits, MethodSandbox

ASSETS = Path(__file__).parent / "assets" / "arena"
SCALARS = {"budget": BUDGET, "layer": 0, "n_layers": 1, "compression_ratio": 0.75}
WEIGHTED = '''import numpy as np


class Method:
    """Scores each token by its keys projected on a shipped direction."""

    def __init__(self, params):
        self.w = params["w"]

    def score(self, layer):
        return (layer.keys @ self.w).astype(np.float32)
'''
WRITES_PARAMS = WEIGHTED.replace("self.w = params[\"w\"]", "self.w = params[\"w\"]\n        self.w[0] = 1.0")


def _folder(tmp_path: Path, code: str, name: str = "weighted") -> Path:
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    return folder


def _answer(sub) -> np.ndarray:
    with MethodSandbox(sub, Limits(timeout_s=10.0, memory_mb=256)) as box:
        return box.answer(layer_arrays(), **SCALARS)


def test_params_reach_the_constructor_and_change_the_scores(tmp_path):
    dim = layer_arrays()["keys"].shape[-1]
    rng = np.random.default_rng(0)
    a, b = _folder(tmp_path, WEIGHTED, "a"), _folder(tmp_path, WEIGHTED, "b")
    np.savez(a / "params.npz", w=rng.normal(size=dim).astype(np.float32))
    np.savez(b / "params.npz", w=rng.normal(size=dim).astype(np.float32))
    sa, sb = load_submission(a), load_submission(b)
    assert sa.params_sha256 and sa.params_sha256 != sb.params_sha256
    assert sa.code_sha256 == sb.code_sha256 and sa.identity != sb.identity  # different runs, never one sandbox
    assert "params" in sa.hooks
    keys = layer_arrays()["keys"]
    expected = keys @ sa.params_arrays["w"]
    got_a, got_b = _answer(sa), _answer(sb)
    np.testing.assert_allclose(got_a, expected, rtol=1e-5)
    assert not np.allclose(got_a, got_b)


def test_params_are_read_only_inside_the_sandbox(tmp_path):
    folder = _folder(tmp_path, WRITES_PARAMS)
    np.savez(folder / "params.npz", w=np.ones(layer_arrays()["keys"].shape[-1], np.float32))
    with pytest.raises(SubmissionError) as err:
        _answer(load_submission(folder))
    assert err.value.kind in {"tampering", "crash"} and "read-only" in str(err.value)


def test_a_submission_without_params_is_built_without_arguments(tmp_path):
    sub = load_submission(ASSETS / "good_scores")
    assert sub.params_sha256 == "" and sub.params == b"" and "params" not in sub.hooks
    assert _answer(sub).shape == layer_arrays()["keys"].shape[:2]


def _write(folder: Path, raw: bytes) -> Path:
    (folder / "params.npz").write_bytes(raw)
    return folder


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize("make, words", [
    (lambda: _npz(w=np.array([{"a": 1}], dtype=object)), "pickle"),  # an object array: never unpickled
    (lambda: _npz(w=np.array(["text"])), "dtype"),
    (lambda: _npz(w=np.array([1.0, np.nan], np.float32)), "non-finite"),
    (lambda: _npz(w=np.array([np.inf])), "non-finite"),
    (lambda: _npz(w=np.array([1 + 2j])), "dtype"),
    (lambda: b"not a zip at all", "not an npz"),
    (lambda: _npz(), "no arrays"),
])
def test_bad_params_are_refused(tmp_path, make, words):
    folder = _write(_folder(tmp_path, WEIGHTED), make())
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind == "bad_params" and words in str(err.value)


def test_params_over_the_cap_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(params_mod, "MAX_PARAMS_BYTES", 4096)
    folder = _write(_folder(tmp_path, WEIGHTED), _npz(w=np.zeros(4096, np.float32)))
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind == "bad_params" and "4096" in str(err.value)


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    monkeypatch.setattr(params_mod, "MAX_PARAMS_UNPACKED", 1 << 20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("w.npy", "w") as f:
            np.lib.format.write_array(f, np.zeros(1 << 20, np.float32))  # 4 MB of zeros, a few KB packed
    folder = _write(_folder(tmp_path, WEIGHTED), buf.getvalue())
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert "unpacks to" in str(err.value)


def test_a_symlinked_params_file_is_refused(tmp_path):
    outside = tmp_path / "secret.npz"
    outside.write_bytes(_npz(w=np.ones(3)))
    folder = _folder(tmp_path, WEIGHTED)
    (folder / "params.npz").symlink_to(outside)
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind == "bad_folder"  # a link anywhere in a submission folder (safe_files.folder_problem)


def test_the_judges_bundle_names_the_params_hash_not_the_numbers(tmp_path):
    folder = _folder(tmp_path, WEIGHTED)
    np.savez(folder / "params.npz", w=np.arange(8, dtype=np.float32))
    sub = load_submission(folder)
    bundle = load_bundle(folder)
    assert bundle.params == {"sha256": sub.params_sha256, "arrays": {"w": {"dtype": "float32", "shape": [8]}}}
    assert bundle.as_prompt()["submission"]["params.npz"]["sha256"] == sub.params_sha256
    assert "params.npz" not in load_bundle(ASSETS / "good_scores").as_prompt()["submission"]


def test_a_pickled_object_array_is_never_unpickled(tmp_path):
    import io
    import os

    from cachecraft_lib.arena.submissions.folder import SubmissionError
    from cachecraft_lib.arena.submissions.params import parse_params

    marker = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    buf = io.BytesIO()
    np.savez(buf, w=np.array([Boom()], dtype=object))
    with pytest.raises(SubmissionError, match="bad_params"):
        parse_params(buf.getvalue())
    assert not marker.exists()


def test_arena_check_lists_the_hooks_and_the_params_hash(tmp_path):
    import os
    import subprocess
    import sys

    folder = tmp_path / "checked"
    shutil.copytree(ASSETS / "good_scores", folder)
    np.savez(folder / "params.npz", w=np.ones(4, np.float32))
    with pytest.raises(SubmissionError, match="__init__"):
        load_submission(folder)  # params shipped to a Method that cannot take them: refused at check
    code = (folder / "method.py").read_text().replace("class Method:", "class Method:\n    def __init__(self, params):\n"
                                                      "        self.params = params\n", 1)
    (folder / "method.py").write_text(code)
    (folder / "metadata.yaml").write_text("name: checked\nauthor: tester\nboards: [A]\nprobes: ['List the facts.']\n")
    out = subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "arena", "check", str(folder)],
                         capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "hooks score, params, probes" in out.stdout and "params sha256" in out.stdout
