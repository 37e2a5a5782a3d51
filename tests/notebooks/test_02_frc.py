"""Notebook 02 (FRC step by step) under the smoke profile, its recorded values asserted and pinned."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_notebook_02_frc(smoke, figures):
    r = smoke("02")
    assert r["identical"] is True and r["ratios"] == [0.5, 0.88]
    assert r["kept_chunks"] == max(1, int(r["n_chunks"] * 0.12))
    assert r["accepted"] == ["valid tokenwise top-K"]
    assert sorted(set(r["rejected"])) == ["integer", "range", "shape", "size", "unique"]
    assert set(r["answers"]) == {"no_press", "frc", "snapkv", "chunkkv"}
    assert all(isinstance(v, str) for v in r["answers"].values())
    assert all(isinstance(v, bool) for v in r["correct"].values())
    # the smoke run's values: the validator's cases in order, and greedy answers of the embedded model
    assert (r["n_chunks"], r["kept_chunks"]) == (44, 5)
    assert r["rejected"] == ["size", "size", "unique", "range", "range", "integer", "shape", "size"]
    assert r["correct"] == {"no_press": True, "frc": False, "snapkv": False, "chunkkv": False}
    assert r["answers"]["no_press"] == "1419610."
    assert all(r["answers"][m] == "c " * 30 for m in ("frc", "snapkv", "chunkkv"))  # r = 0.88 loses the needle
    assert (figures / "fig_frc_steps.png").exists() and (figures / "table_validator_cases.md").exists()
