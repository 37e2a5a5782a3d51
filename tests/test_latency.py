"""The latency benchmark at smoke scale returns sane values with their spread (notebook 06: tests/notebooks/)."""

from __future__ import annotations

import math

import pytest

from cachecraft_lib import latency, timing_stats
from cachecraft_lib.timing_stats import Spread, median_interval, paired_ratios, verdict


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
        assert row.mean_ms > 0 and row.median_ms > 0 and row.std_ms >= 0 and row.peak_mb > 0
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
