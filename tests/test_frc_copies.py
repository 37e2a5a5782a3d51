"""FRC's maths has one home, ``methods/frc.py`` (torch; its numpy helpers are ``sandbox/runtime/policy_api.py``).
The copies that must stay self-contained, because they run where the library cannot be imported (the sandbox),
are checked against it here, one test each: the search's V5 seed, the arena's FRC example submission and the
helpers a converted search program carries. (The policy program ``methods/programs/frc_policy.py`` against
``FRCPress``: tests/test_presses.py and tests/test_paper_consistency.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cachecraft_lib.methods import frc
from cachecraft_lib.methods.features import build_context
from cachecraft_lib.methods.policy import load_policy, run_policy
from cachecraft_lib.sandbox.runtime import policy_api
from cachecraft_lib.search.seeds import SEEDS_DIR

LIB = Path(frc.__file__).resolve().parents[1]
SIGNALS = [np.array([0.0, 0.0, 0.0], np.float32), np.array([-3.0, 1.5, 2.0], np.float32),
           np.random.default_rng(0).standard_normal(97).astype(np.float32)]


def _attention(length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    attn = torch.rand(2, 64, length, generator=gen)
    attn = attn / attn.sum(-1, keepdim=True)
    return attn, torch.randn(2, length, 8, generator=gen), torch.randn(2, length, 8, generator=gen)


def _namespace(path: Path) -> dict:
    namespace: dict = {"__name__": path.stem}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("length,ratio", [(200, 0.5), (333, 0.83), (1000, 0.25)])
def test_the_v5_seed_is_frc_with_the_seed_weights(length, ratio):
    attn, keys, values = _attention(length, length)
    kept = run_policy(load_policy(SEEDS_DIR / "v5_frc_family.py"), build_context(attn, keys, values, ratio, 0))
    want = frc.chunk_top_k(frc.frc_token_scores(attn, weights=frc.FRC_SEED_WEIGHTS), ratio, 20)
    assert sorted(np.asarray(kept).tolist()) == sorted(want.tolist())


def test_the_frc_example_submission_normalises_as_frc():
    ns = _namespace(LIB / "arena" / "examples" / "frc" / "method.py")
    assert tuple(ns["WEIGHTS"]) == frc.FRC_WEIGHTS
    for signal in SIGNALS:
        np.testing.assert_array_equal(ns["_maxabs"](signal), frc.maxabs(torch.from_numpy(signal)).numpy())


def test_a_converted_program_carries_the_same_helpers(tmp_path):
    from cachecraft_lib.arena.submissions.from_program import program_to_submission
    from cachecraft_lib.methods.programs import FRC_PROGRAM

    program_to_submission(FRC_PROGRAM, tmp_path / "sub", "converted")
    ns = _namespace(tmp_path / "sub" / "method.py")
    for signal in SIGNALS:
        np.testing.assert_array_equal(ns["maxabs"](signal), policy_api.maxabs(signal))
        np.testing.assert_array_equal(ns["maxabs"](signal), frc.maxabs(torch.from_numpy(signal)).numpy())
