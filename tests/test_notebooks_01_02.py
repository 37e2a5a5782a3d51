"""Notebooks 01 (features) and 02 (FRC) under the smoke profile, with their recorded values asserted."""

from __future__ import annotations

import pytest

from cachecraft_lib.notebooks import list_notebooks, run_notebook


@pytest.mark.slow
def test_notebook_01_features(tmp_path):
    r = run_notebook(list_notebooks(["01"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f").records
    assert r["n_features"] == 17 and r["layers"] >= 4
    lo, hi = r["needle"]
    assert 0 < lo < hi <= r["L"]
    n_chunks = -(-r["L"] // 20)
    full, short_by = max(1, int(n_chunks * 0.12)) * 20, n_chunks * 20 - r["L"]  # the last chunk may be short
    assert all(k in (full, full - short_by) for k in r["kept_per_layer"]), r["kept_per_layer"]  # whole chunks, r = 0.88
    assert all(0.0 <= v <= 1.0 for v in r["needle_kept"].values())
    assert 0 < r["attention_on_needle"] < 1
    assert set(r["snapkv_needle_kept"]) == {"1024", "2048"}  # SnapKV 0.25's share of the needle, per length
    assert all(0.0 <= v <= 1.0 for v in r["snapkv_needle_kept"].values())
    assert r["corr_shape"][0] == r["corr_shape"][1] >= 15
    assert (tmp_path / "f" / "table_snapkv_needle_kept.md").exists()
    for name in ("fig_features_along_sequence", "fig_feature_correlation", "fig_frc_kept_vs_needle"):
        assert (tmp_path / "f" / f"{name}.png").exists()


@pytest.mark.slow
def test_notebook_02_frc(tmp_path):
    r = run_notebook(list_notebooks(["02"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f").records
    assert r["identical"] is True and r["ratios"] == [0.5, 0.88]
    assert r["kept_chunks"] == max(1, int(r["n_chunks"] * 0.12))
    assert r["accepted"] == ["valid tokenwise top-K"]
    assert sorted(set(r["rejected"])) == ["integer", "range", "shape", "size", "unique"]
    assert set(r["answers"]) == {"no_press", "frc", "snapkv", "chunkkv"}
    assert all(isinstance(v, str) for v in r["answers"].values())
    assert all(isinstance(v, bool) for v in r["correct"].values())
    assert (tmp_path / "f" / "fig_frc_steps.png").exists() and (tmp_path / "f" / "table_validator_cases.md").exists()
