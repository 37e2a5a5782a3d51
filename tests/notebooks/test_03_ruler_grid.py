"""Notebook 03 (RULER grid, Takeaway 1) under the smoke profile, values asserted and the smoke run's pinned.

It runs with two samples per task (``SAMPLES=2``): the smoke profile's one sample per task gives no interval;
and at 2048 tokens only (``LENGTHS=[2048]``): at 1024 every method scored 0 at r = 0.88, a cell a broken method
would fill alike. At 2048 no cell is all 0 and the methods differ (FRC 52.5, SnapKV 40, ChunkKV 37.5 at r = 0.5).
"""

from __future__ import annotations

import pytest

from cachecraft_lib.stats.intervals import VERDICTS


def inside(row: dict, point: str, lo: str, hi: str) -> bool:
    return row[lo] is not None and row[lo] - 1e-6 <= row[point] <= row[hi] + 1e-6


def by_cell(aggregates: dict[str, float]) -> dict[str, float]:
    """Cell names (``ruler__<length>__<model>__<method>__<ratio>__...``) as ``length/method/ratio``."""
    return {"/".join(name.split("__")[i] for i in (1, 3, 4)): v for name, v in aggregates.items()}


# the smoke run's RULER aggregates (embedded model, 2 samples of 4 tasks at 2048 tokens, greedy decoding)
AGGREGATES = {"2048/no_press/0.00": 52.5, "2048/frc/0.50": 52.5, "2048/snapkv/0.50": 40.0, "2048/chunkkv/0.50": 37.5,
              "2048/frc/0.88": 50.0, "2048/snapkv/0.88": 25.0, "2048/chunkkv/0.88": 50.0}


@pytest.mark.slow
def test_notebook_03_ruler_grid(smoke, figures, tmp_path):
    r = smoke("03", RESULTS=str(tmp_path / "grid"), SAMPLES=2, LENGTHS=[2048])
    assert r["cells"] == 1 + 2 * 3 and r["source"] == "offline" and r["samples_per_task"] == 2
    assert r["methods"] == ["chunkkv", "frc", "no_press", "snapkv"]
    assert len(r["frc_rank"]) == 2 and all(1 <= k <= 3 for k in r["frc_rank"])
    assert all(1 <= best <= worst <= 3 for best, worst in r["frc_rank_range"])
    assert len(r["curve"]) == r["cells"] and all(inside(p, "aggregate", "lo", "hi") for p in r["curve"])
    # the stand-in cell once, both paper models beside it in columns of their own, by the stated correspondence
    assert len(r["r088"]) == 1 and all(0 <= row["frc"] <= 100 for row in r["r088"])
    assert all("not a match" in row["correspondence"] and "Llama-3.1-8B-Instruct and Qwen3-8B" in row["correspondence"]
               and row["paper_llama_frc"] > 0 and row["paper_qwen_frc"] > 0 for row in r["r088"])
    assert all(inside(row, "gain", "gain_lo", "gain_hi") and row["gain_verdict"] in VERDICTS for row in r["r088"])
    assert r["degradation"] and all(inside(row, "drop", "lo", "hi") for row in r["degradation"])
    assert r["tasks"] == ["niah_single_1", "niah_multikey_2", "vt", "qa_1", "aggregate"]
    assert r["verdicts"] and set(r["verdicts"]) <= set(VERDICTS)
    assert all(0 <= v <= 100 for v in r["aggregates"].values())
    # per-sample scores give the stored aggregates (rounded to 2 dp when stored)
    assert r["sample_aggregates"].keys() == r["aggregates"].keys()
    assert all(abs(r["sample_aggregates"][c] - v) <= 0.01 for c, v in r["aggregates"].items())
    # the smoke run's values, and the seeded bootstrap's intervals on them: no cell all 0, FRC first by point
    assert by_cell(r["aggregates"]) == pytest.approx(AGGREGATES, abs=1e-6)
    assert r["frc_rank"] == [1, 1] and r["frc_rank_range"] == [[1, 3], [1, 3]]
    assert [p[k] for p in r["curve"] for k in ("lo", "hi")] == pytest.approx(  # cells in name order
        [12.5, 62.5, 25.0, 75.0, 27.5, 77.5, 25.0, 75.0, 50.0, 55.0, 25.0, 55.0, 0.0, 50.0], abs=1e-6)
    assert [row[k] for row in r["r088"] for k in ("no_press", "frc", "gain", "paper_llama_frc", "paper_qwen_frc")] == (
        pytest.approx([52.5, 50.0, 0.0, 89.7, 88.6], abs=1e-6))  # FRC and ChunkKV alike on every sample at 0.88
    assert {row["gain_verdict"] for row in r["r088"]} == {"inconclusive at this sample size"}
    assert [(row["method"], row["drop"], row["lo"], row["hi"]) for row in r["degradation"]] == [
        ("chunkkv", pytest.approx(-12.5), pytest.approx(-50.0), pytest.approx(25.0)),
        ("frc", pytest.approx(2.5), pytest.approx(-22.5), pytest.approx(27.5)),
        ("snapkv", pytest.approx(15.0), pytest.approx(0.0), pytest.approx(30.0))]
    assert r["mildest_loss"] == [pytest.approx({"loss": 0.0, "lo": -25.0, "hi": 25.0})]
    assert r["verdicts"] == ["inconclusive at this sample size"] * 3
    assert r["needed_per_task"] == [None, 6, 5]
    for name in ("fig_ruler_vs_ratio.png", "table_ruler_r088.md", "table_frc_rank.csv", "table_verdicts_takeaway1.tex"):
        assert (figures / name).exists()
    table = (figures / "table_ruler_r088.md").read_text()
    assert "embedded tiny model" in table and "95% paired bootstrap" in table
