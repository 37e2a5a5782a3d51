"""Notebook 02 (FRC step by step) under the smoke profile, its recorded values asserted and pinned.

It runs on a slice with an outcome a bug would change: single-needle NIAH at r = 0.5, where the uncompressed
cache, FRC and ChunkKV answer correctly and SnapKV (query-agnostic) does not. At the default r = 0.88 every
method loses the needle and answers the same filler, which a broken FRC selection would too.
"""

from __future__ import annotations

import math

import pytest


@pytest.mark.slow
def test_notebook_02_frc(smoke, figures):
    r = smoke("02", TASK="niah_single_1", RATIO=0.5)
    assert r["identical"] is True and r["ratios"] == [0.5, 0.88]
    assert r["kept_chunks"] == max(1, math.floor(r["n_chunks"] * (1 - 0.5)))
    assert r["accepted"] == ["valid tokenwise top-K"]
    assert sorted(set(r["rejected"])) == ["integer", "range", "shape", "size", "unique"]
    assert set(r["answers"]) == {"no_press", "frc", "snapkv", "chunkkv"}
    # the smoke run's values: the validator's cases in order, and greedy answers of the embedded model
    assert (r["n_chunks"], r["kept_chunks"]) == (43, 21)
    assert r["rejected"] == ["size", "size", "unique", "range", "range", "integer", "shape", "size"]
    # FRC keeps the needle's chunk and answers; SnapKV loses it: the methods differ, and the answer is checkable
    assert r["answer_chunks"] == [23] and r["answer_kept"] is True
    assert r["correct"] == {"no_press": True, "frc": True, "snapkv": False, "chunkkv": True}
    assert r["answers"]["no_press"] == r["answers"]["frc"] == r["answers"]["chunkkv"] == "1419610."
    assert r["answers"]["snapkv"] != r["answers"]["frc"]
    assert (figures / "fig_frc_steps.png").exists() and (figures / "table_validator_cases.md").exists()
