"""The latency benchmark at smoke scale returns sane values; notebook 06 runs under smoke."""

from __future__ import annotations

import math

import pytest

from cachecraft_lib import latency
from cachecraft_lib.notebooks import list_notebooks, run_notebook


def test_measure_returns_sane_values(tiny_model):
    model, _ = tiny_model
    table = latency.measure(model, "tiny", [256, 512], ["no_press", "snapkv", "chunkkv", "frc"], 0.88, repeats=3,
                            warmup=1, progress=False)
    assert len(table) == 8
    for row in table.itertuples():
        assert row.mean_ms > 0 and row.median_ms > 0 and row.std_ms >= 0 and row.peak_mb > 0
        assert not any(math.isnan(v) for v in (row.mean_ms, row.std_ms, row.median_ms, row.scoring_median_ms))
        assert (row.scoring_median_ms == 0) == (row.method == "no_press")
        # no timing comparison here: scoring and prefill are timed in separate runs, and a loaded machine can
        # invert them (seen in CI: 372 vs 126 ms); benchmarks/ and notebook 06 report the real ratios
    ratios = latency.ratios(table, "scoring_median_ms")
    assert list(ratios.length) == [256, 512] and (ratios.frc_over_snapkv > 0).all()
    share = latency.overhead_share(table)
    assert (share.share_of_prefill > 0).all()
    assert share.share_of_prefill.tolist() == pytest.approx((share.scoring_median_ms / share.median_ms).tolist())


def test_eight_b_shape_is_llama_31_8b():
    model = latency.eight_b_shaped_llama("meta", layers=2)  # shapes only, no memory
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size) == \
        (4096, 32, 8, 14336)
    assert cfg.vocab_size == 128256 and cfg.rope_parameters["rope_theta"] == 500000.0
    assert cfg.rope_parameters["rope_type"] == "llama3"


def test_save_writes_table_and_meta(tmp_path, tiny_model):
    import json

    table = latency.measure(tiny_model[0], "tiny", [256], ["no_press", "frc"], 0.5, repeats=2, warmup=0,
                            progress=False)
    path = latency.save(table, tmp_path, meta={"profile": "test"})
    assert path.exists() and json.loads((tmp_path / "latency.json").read_text())["meta"]["profile"] == "test"


@pytest.mark.slow
def test_notebook_06_latency(tmp_path):
    r = run_notebook(list_notebooks(["06"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f").records
    assert r["methods"] == ["chunkkv", "frc", "no_press", "snapkv"] and r["rows"] == 4 and r["gpu"] is False
    assert all(v > 0 for v in r["mean_ms"].values())
    assert len(r["prefill_ratios"]) == 2 and all(0.2 < v < 5 for v in r["prefill_ratios"])
    assert r["scoring_ratios"][0]["frc_over_snapkv"] > 0
    assert (tmp_path / "f" / "fig_latency.png").exists() and (tmp_path / "f" / "table_latency.md").exists()
