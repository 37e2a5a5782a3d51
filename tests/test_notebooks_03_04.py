"""Notebooks 03 (RULER grid) and 04 (decomposition) under the smoke profile, values asserted."""

from __future__ import annotations

import pytest

from cachecraft_lib.notebooks import list_notebooks, run_notebook

VERDICTS = {"reproduced", "not reproduced", "not measurable here"}


@pytest.mark.slow
def test_notebook_03_ruler_grid(tmp_path):
    r = run_notebook(list_notebooks(["03"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f",
                     parameters={"RESULTS": str(tmp_path / "grid")}).records
    assert r["cells"] == 2 * (1 + 2 * 3) and r["source"] == "offline"
    assert r["methods"] == ["chunkkv", "frc", "no_press", "snapkv"]
    assert len(r["frc_rank"]) == 4 and all(1 <= k <= 3 for k in r["frc_rank"])
    assert len(r["r088"]) == 2 and all(0 <= row["frc"] <= 100 for row in r["r088"])
    assert r["tasks"] == ["niah_single_1", "niah_multikey_2", "vt", "qa_1", "aggregate"]
    assert r["verdicts"] and set(r["verdicts"]) <= VERDICTS
    assert all(0 <= v <= 100 for v in r["aggregates"].values())
    for name in ("fig_ruler_vs_ratio.png", "table_ruler_r088.md", "table_frc_rank.csv", "table_verdicts_takeaway1.tex"):
        assert (tmp_path / "f" / name).exists()
    assert "embedded tiny model" in (tmp_path / "f" / "table_ruler_r088.md").read_text()


@pytest.mark.slow
def test_notebook_04_decomposition(tmp_path):
    r = run_notebook(list_notebooks(["04"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f",
                     parameters={"RESULTS": str(tmp_path / "dec")}).records
    assert r["cells"] == 9
    assert set(r["scorer"]) == {"v1_tokenwise", "frc", "frc_tokenwise"}
    assert set(r["ablation"]) == {"frc", "frc_no_maxhead", "frc_no_density", "frc_local_only", "chunkkv"}
    assert len(r["verdicts"]) == 4 and set(r["verdicts"]) <= VERDICTS
    if r["no_press"] < 25:
        assert set(r["verdicts"]) == {"not measurable here"}
    assert (tmp_path / "f" / "fig_decomposition.png").exists()
