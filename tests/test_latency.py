"""The latency benchmark at smoke scale returns sane values with their spread (notebook 06: tests/notebooks/)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cachecraft_lib.paper import latency
from cachecraft_lib.stats import timing as timing_stats
from cachecraft_lib.stats.timing import Spread, median_interval, paired_ratios, verdict


@pytest.fixture(scope="module")
def samples(tiny_model):
    model, _ = tiny_model
    return latency.measure_samples(model, "tiny", [256, 512], ["no_press", "snapkv", "chunkkv", "frc"], 0.88,
                                   repeats=3, warmup=1, progress=False)


def test_measure_returns_sane_values_with_their_spread(samples):
    assert len(samples) == 2 * 3 * 4 and set(samples.repeat) == {0, 1, 2}
    table = latency.summarise(samples)
    assert len(table) == 8
    for row in table.itertuples():
        assert row.mean_ms > 0 and row.median_ms > 0 and row.std_ms >= 0
        assert math.isnan(row.peak_mb)  # a CPU has no per-method peak (the RSS peak is the process's)
        assert not any(math.isnan(v) for v in (row.mean_ms, row.std_ms, row.median_ms, row.scoring_median_ms))
        assert row.median_lo_ms <= row.median_ms <= row.median_hi_ms
        assert row.coverage == pytest.approx(0.75)  # three repeats: [min, max] covers the median 75% of the time
        assert (row.scoring_median_ms == 0) == (row.method == "no_press")
        # no timing comparison here: a loaded machine can invert any two timings; notebook 06 reports them
        # with their intervals and an 'inconclusive' verdict where the interval says so


def test_ratios_are_paired_per_round(samples):
    r = latency.ratios(samples, "scoring_ms")
    assert list(r.length.unique()) == [256, 512] and set(r.ratio) == {"frc_over_snapkv", "frc_over_chunkkv"}
    g = samples[samples.length == 256]
    frc = g[g.method == "frc"].sort_values("repeat").scoring_ms.tolist()
    snap = g[g.method == "snapkv"].sort_values("repeat").scoring_ms.tolist()
    expected = median_interval([a / b for a, b in zip(frc, snap, strict=True)])
    row = r[(r.length == 256) & (r.ratio == "frc_over_snapkv")].iloc[0]
    assert (row.here, row.lo, row.hi) == pytest.approx((expected.median, expected.lo, expected.hi))
    comparison = latency.paper_comparison(samples)
    assert set(comparison.verdict) == {"inconclusive"}  # three repeats are too few to decide either way
    share = latency.overhead_share(samples)
    assert (share.share_of_prefill > 0).all() and (share.share_lo <= share.share_hi).all()


def test_median_interval_is_the_order_statistic_interval():
    ten = list(range(10, 0, -1))
    s = median_interval(ten)
    assert (s.median, s.lo, s.hi, s.n) == (5.5, 2, 9, 10)  # [x(2), x(9)]: 1 - 2*11/1024 = 97.9 %
    assert s.coverage == pytest.approx(1 - 2 * 11 / 1024)
    hundred = median_interval(range(100))
    assert hundred.coverage >= 0.95 and 38 <= hundred.lo < hundred.median < hundred.hi <= 61
    two = median_interval([3.0, 1.0])
    assert (two.lo, two.hi, two.coverage) == (1.0, 3.0, 0.5)
    assert math.isnan(median_interval([]).median)
    assert paired_ratios([2.0, 3.0], [1.0, 0.0])[0] == 2.0 and math.isnan(paired_ratios([1.0], [0.0])[0])
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


@pytest.mark.parametrize("lo,hi,coverage,expected", [
    (1.12, 1.25, 0.98, timing_stats.REPRODUCED),  # inside the range
    (0.90, 1.05, 0.98, timing_stats.CONTRADICTED),  # wholly below
    (1.35, 1.50, 0.98, timing_stats.CONTRADICTED),  # wholly above
    (1.00, 1.20, 0.98, timing_stats.INCONCLUSIVE),  # straddles the lower bound
    (1.00, 1.40, 0.98, timing_stats.INCONCLUSIVE),  # wider than the range
    (1.12, 1.25, 0.50, timing_stats.INCONCLUSIVE),  # too few repeats for a 95 % interval
])
def test_verdict_is_three_valued(lo, hi, coverage, expected):
    assert verdict(Spread((lo + hi) / 2, lo, hi, coverage, 10), 1.1, 1.3) == expected


def test_eight_b_shape_is_llama_31_8b():
    model = latency.eight_b_shaped_llama("meta", layers=2)  # shapes only, no memory
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size) == \
        (4096, 32, 8, 14336)
    assert cfg.vocab_size == 128256 and cfg.rope_parameters["rope_theta"] == 500000.0
    assert cfg.rope_parameters["rope_type"] == "llama3"


def test_save_writes_table_samples_and_meta(tmp_path, tiny_model):
    import json

    samples = latency.measure_samples(tiny_model[0], "tiny", [256], ["no_press", "frc"], 0.5, repeats=2, warmup=0,
                                      progress=False)
    path = latency.save(latency.summarise(samples), tmp_path, meta={"profile": "test"}, samples=samples)
    assert path.exists() and json.loads((tmp_path / "latency.json").read_text())["meta"]["profile"] == "test"
    assert len((tmp_path / "latency_samples.csv").read_text().splitlines()) == 1 + 4


def test_peak_memory_counts_the_prefill_not_what_was_resident(monkeypatch):
    """On a GPU the window's peak minus what was allocated at its start: the model and the shared prefill
    (3 GiB here) are not charged to the method (fake allocator counters); a CPU reports NaN, not the RSS."""
    import torch

    state = {"allocated": 3 * 2**30, "peak": 0}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: state.update(peak=state["allocated"]))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: state["peak"])
    cuda = torch.device("cuda")
    baseline = latency._peak_reset(cuda)
    state["peak"] += 512 * 2**20  # the method's prefill needs 512 MiB more
    assert latency._peak_mb(cuda, baseline) == 512.0
    assert math.isnan(latency._peak_mb(torch.device("cpu"), latency._peak_reset(torch.device("cpu"))))


def test_append_table_keeps_every_column_of_an_older_header(tmp_path):
    import pandas as pd

    path = tmp_path / "latency_gpu.csv"
    path.write_text("date,gpu,model,median_ms,note\n2026-01-01,H100,m,10.0,old\n")
    new = pd.DataFrame([{"date": "2026-12-02", "gpu": "H200", "model": "m", "median_ms": 9.0, "device": "cuda:0",
                         "peak_mb": 512.0, "scoring_median_ms": 1.5, "scoring_mean_ms": 1.6, "note": "new"}])
    latency.append_table(new, path)
    table = pd.read_csv(path)
    assert {"peak_mb", "device", "scoring_median_ms", "scoring_mean_ms"} <= set(table.columns)
    assert list(table.columns[:5]) == ["date", "gpu", "model", "median_ms", "note"] and len(table) == 2
    assert table.peak_mb.iloc[1] == 512.0 and pd.isna(table.peak_mb.iloc[0])
    latency.append_table(new, tmp_path / "fresh.csv")
    assert list(pd.read_csv(tmp_path / "fresh.csv").columns) == list(new.columns)


def test_gpu_latency_script_writes_through_append_table():
    from pathlib import Path

    source = (Path(__file__).parents[1] / "scripts" / "gpu_latency.py").read_text()
    assert "reindex" not in source and source.count("append_table(") == 2  # the table and the samples


def test_one_three_valued_rule_for_timings_and_scores():
    from cachecraft_lib.stats.intervals import CONTRADICTED, REPRODUCED, against_range

    assert against_range(1.1, 1.3, 1.1, 1.3, closed=True) == REPRODUCED  # a timing range includes its bounds
    assert against_range(0.0, 2.0, 0.0, math.inf) is None  # a difference touching 0 allows both
    assert against_range(-2.0, -1.0, 0.0, math.inf) == CONTRADICTED
    assert verdict(Spread(1.2, 1.1, 1.3, 0.98, 9), 1.1, 1.3) == timing_stats.REPRODUCED


def test_cpu_timings_of_a_tiny_model_are_not_judged_against_the_h100_ranges():
    from cachecraft_lib.stats.timing import paper_hardware

    comparison = pd.DataFrame({"model": ["embedded tiny model", "llama-3.1-8b-shaped (random weights)"],
                               "here": [0.9, 1.2], "verdict": ["contradicted", "reproduced"]})
    samples = pd.DataFrame({"model": ["embedded tiny model", "llama-3.1-8b-shaped (random weights)"],
                            "device": ["cpu", "cuda:0"]})
    out = paper_hardware(comparison, samples)
    assert out.verdict.tolist() == ["not measurable here", "reproduced"]
    assert out.verdict_if_comparable.tolist() == ["contradicted", "reproduced"] and out.here.tolist() == [0.9, 1.2]
