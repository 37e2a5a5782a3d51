"""Notebooks 03 (RULER grid) and 04 (decomposition) under the smoke profile, values asserted.

They run with two samples per task (``SAMPLES=2``): the smoke profile's one sample per task gives no interval.
"""

from __future__ import annotations

import pytest

from cachecraft_lib.intervals import VERDICTS
from cachecraft_lib.notebooks import list_notebooks, run_notebook


def inside(row: dict, point: str, lo: str, hi: str) -> bool:
    return row[lo] is not None and row[lo] - 1e-6 <= row[point] <= row[hi] + 1e-6


@pytest.mark.slow
def test_notebook_03_ruler_grid(tmp_path):
    r = run_notebook(list_notebooks(["03"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f",
                     parameters={"RESULTS": str(tmp_path / "grid"), "SAMPLES": 2}).records
    assert r["cells"] == 2 * (1 + 2 * 3) and r["source"] == "offline" and r["samples_per_task"] == 2
    assert r["methods"] == ["chunkkv", "frc", "no_press", "snapkv"]
    assert len(r["frc_rank"]) == 4 and all(1 <= k <= 3 for k in r["frc_rank"])
    assert all(1 <= best <= worst <= 3 for best, worst in r["frc_rank_range"])
    assert len(r["curve"]) == r["cells"] and all(inside(p, "aggregate", "lo", "hi") for p in r["curve"])
    # each stand-in cell beside both paper models, by the stated correspondence
    assert len(r["r088"]) == 4 and all(0 <= row["frc"] <= 100 for row in r["r088"])
    assert {row["paper_model"] for row in r["r088"]} == {"Llama-3.1-8B-Instruct", "Qwen3-8B"}
    assert all("not a match" in row["correspondence"] and row["paper_frc"] > 0 for row in r["r088"])
    assert all(inside(row, "gain", "gain_lo", "gain_hi") and row["gain_verdict"] in VERDICTS for row in r["r088"])
    assert r["degradation"] and all(inside(row, "drop", "lo", "hi") for row in r["degradation"])
    assert r["tasks"] == ["niah_single_1", "niah_multikey_2", "vt", "qa_1", "aggregate"]
    assert r["verdicts"] and set(r["verdicts"]) <= set(VERDICTS)
    assert all(0 <= v <= 100 for v in r["aggregates"].values())
    # per-sample scores give the stored aggregates (rounded to 2 dp when stored)
    assert r["sample_aggregates"].keys() == r["aggregates"].keys()
    assert all(abs(r["sample_aggregates"][c] - v) <= 0.01 for c, v in r["aggregates"].items())
    for name in ("fig_ruler_vs_ratio.png", "table_ruler_r088.md", "table_frc_rank.csv", "table_verdicts_takeaway1.tex"):
        assert (tmp_path / "f" / name).exists()
    table = (tmp_path / "f" / "table_ruler_r088.md").read_text()
    assert "embedded tiny model" in table and "95% paired bootstrap" in table


@pytest.mark.slow
def test_notebook_04_decomposition(tmp_path):
    r = run_notebook(list_notebooks(["04"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f",
                     parameters={"RESULTS": str(tmp_path / "dec"), "SAMPLES": 2}).records
    assert r["cells"] == 9 and r["samples_per_task"] == 2
    assert set(r["scorer"]) == {"v1_tokenwise", "frc", "frc_tokenwise"}
    assert set(r["ablation"]) == {"frc", "frc_no_maxhead", "frc_no_density", "frc_local_only", "chunkkv"}
    for ci in (r["scorer_ci"], r["ablation_ci"]):
        assert all(inside(row, "here", "here_lo", "here_hi") for row in ci.values())
    assert len(r["verdicts"]) == 4 and set(r["verdicts"]) <= set(VERDICTS)
    if r["no_press"] < 25:
        assert set(r["verdicts"]) == {"not measurable here"}
    assert (tmp_path / "f" / "fig_decomposition.png").exists()
