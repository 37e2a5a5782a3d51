"""The paired bootstrap, the three-valued verdicts and the per-sample scores they rest on."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.grid.samples import CorruptResultWarning, load_samples, sample_score
from cachecraft_lib.ruler import score
from cachecraft_lib.stats.intervals import (
    CONTRADICTED,
    INCONCLUSIVE,
    REPRODUCED,
    Interval,
    Verdict,
    combine,
    fmt,
    judge,
    paired_bootstrap,
    resample_counts,
    units_for_power,
    z_for_power,
    z_two_sided,
)


def table(scores: dict[str, dict[str, list[float]]], model: str = "m", length: int = 1024) -> pd.DataFrame:
    """A per-sample table: ``{unit: {task: [score per sample]}}``."""
    rows = [{"cell": unit, "model": model, "length": length, "task": task, "index": i, "score": float(v)}
            for unit, tasks in scores.items() for task, values in tasks.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_interval_of_a_hand_computed_case():
    # task a is constant; task b has samples 0 and 100, so a resample's mean of b is 0, 50 or 100
    # (p = 1/4, 1/2, 1/4) and the aggregate (a + b) / 2 is 50, 75 or 100: the 95% interval is [50, 100].
    est = paired_bootstrap(table({"x": {"a": [100, 100], "b": [0, 100]}})).mean("x")
    assert (est.point, est.lo, est.hi, est.n) == (75.0, 50.0, 100.0, 2)
    # pooled over tasks (not within task) the aggregate could also be 62.5 or 87.5: it never is
    draws = paired_bootstrap(table({"x": {"a": [100, 100], "b": [0, 100]}})).draws[:, 0]
    assert set(np.round(draws, 6)) == {50.0, 75.0, 100.0}


def test_resample_counts_draw_n_with_replacement():
    counts = resample_counts(np.random.default_rng(0), 5, 300)
    assert counts.shape == (300, 5) and (counts.sum(axis=1) == 5).all() and (counts >= 0).all()
    assert abs(counts.mean() - 1) < 0.05


def test_identical_methods_differ_by_exactly_zero():
    values = {"t1": [0, 100, 50, 20, 80], "t2": [100, 0, 0, 40, 60]}
    boot = paired_bootstrap(table({"a": values, "b": values}))
    d = boot.diff("a", "b")
    assert (d.point, d.lo, d.hi) == (0.0, 0.0, 0.0)
    assert boot.mean("a").hi - boot.mean("a").lo > 20


def test_paired_constant_shift_gives_a_zero_width_difference():
    rng = np.random.default_rng(1)
    a = {t: list(rng.uniform(0, 80, 12)) for t in ("t1", "t2", "t3")}
    b = {t: [v + 10 for v in vals] for t, vals in a.items()}
    boot = paired_bootstrap(table({"a": a, "b": b}))
    d = boot.diff("b", "a")
    assert d.point == pytest.approx(10) and d.lo == pytest.approx(10) and d.hi == pytest.approx(10)
    for unit in ("a", "b"):  # each method alone is uncertain; only pairing removes what they share
        assert boot.mean(unit).hi - boot.mean(unit).lo > 10


def test_seeded_and_independent_of_the_other_cells():
    rng = np.random.default_rng(2)
    data = table({u: {t: list(rng.uniform(0, 100, 8)) for t in ("t1", "t2")} for u in ("a", "b", "c")})
    one, two = paired_bootstrap(data, seed=7), paired_bootstrap(data, seed=7)
    assert np.array_equal(one.draws, two.draws)
    assert not np.array_equal(one.draws, paired_bootstrap(data, seed=8).draws)
    alone = paired_bootstrap(data[data.cell.isin(["a", "b"])], seed=7)  # same draw per stratum, whatever else is in
    assert alone.diff("a", "b") == one.diff("a", "b")
    assert one.draws.shape == (2000, 3)


def test_unpaired_cells_are_refused():
    data = table({"a": {"t": [1, 2, 3]}, "b": {"t": [1, 2]}})
    with pytest.raises(ValueError, match="cannot pair"):
        paired_bootstrap(data)


def test_one_sample_per_task_has_no_interval():
    est = paired_bootstrap(table({"a": {"t": [40]}, "b": {"t": [10]}})).diff("a", "b")
    assert est.point == 30 and not est.defined and est.n == 1
    assert fmt(est) == "30.0 [no interval at n = 1]"
    assert judge(est, low=0) == Verdict(INCONCLUSIVE, None, "for")


def test_format():
    assert fmt(Interval(12.34, 8.06, 16.0, 3)) == "12.3 [8.1, 16.0]"
    assert fmt(Interval(1.0, 0.5, 1.5, 3), digits=2) == "1.00 [0.50, 1.50]"


def test_judge_on_hand_made_intervals():
    assert judge(Interval(5, 1, 9, 10), low=0).verdict == REPRODUCED
    assert judge(Interval(-5, -9, -1, 10), low=0).verdict == CONTRADICTED
    # an interval touching the boundary allows both; an exact tie cannot be resolved by more samples
    assert judge(Interval(-5, -9, 0, 10), low=0).verdict == INCONCLUSIVE
    assert judge(Interval(0, 0, 0, 10), low=0) == Verdict(INCONCLUSIVE, None, "against")
    assert judge(Interval(0.5, -1, 1.8, 10), low=-2, high=2).verdict == REPRODUCED
    assert judge(Interval(6, 3, 9, 10), low=-2, high=2).verdict == CONTRADICTED
    # half-width 10 below the point (SE 10 / 1.96), 5 from the boundary; 80% power asks the point to clear it by
    # (1.96 + 0.84) SE: n * (2.80 * (10 / 1.96) / 5)^2 = 10 * 8.16 = 82 samples per task (not the 40 of a coin flip)
    assert judge(Interval(5, -5, 15, 10), low=0) == Verdict(INCONCLUSIVE, 82, "for")
    assert units_for_power(10, 10, 5) == math.ceil(10 * (z_for_power() * 10 / 1.959964 / 5) ** 2) == 82
    # outside the claim, the same scaling tells when the interval would exclude it
    assert judge(Interval(-2, -6, 2, 10), low=0) == Verdict(INCONCLUSIVE, units_for_power(10, 4, 2), "against")
    # inside a two-sided claim both boundaries must clear: the nearer one decides
    assert judge(Interval(1, -3, 5, 5), low=-2, high=2).needed == units_for_power(5, 4, 1)


def test_power_is_stated_and_met_on_synthetic_data():
    """At the quoted size, a difference equal to the observed one is resolved in about 80% of repeats."""
    rng = np.random.default_rng(11)
    est = paired_bootstrap(table({"a": {"t": list(rng.normal(0, 10, 20))}, "b": {"t": [0.0] * 20}})).diff("a", "b")
    true, sd = 3.0, 10.0  # judge a fresh sample as if its difference were 3 with the same spread
    n = units_for_power(20, z_two_sided() * sd / math.sqrt(20), true)
    hits = [np.mean(x) - z_two_sided() * sd / math.sqrt(n) > 0 for x in rng.normal(true, sd, (2000, n))]
    assert 0.75 < np.mean(hits) < 0.85 and est.n == 20


def synthetic(shift: float, spread: float, n: int, seed: int = 3) -> pd.DataFrame:
    """Method b scores a + shift on average, with per-sample noise of ``spread`` around it."""
    rng = np.random.default_rng(seed)
    a = {t: rng.uniform(0, 100, n) for t in ("t1", "t2")}
    b = {t: np.clip(v + shift + rng.normal(0, spread, n), 0, 100) for t, v in a.items()}
    return table({"a": {t: list(v) for t, v in a.items()}, "b": {t: list(v) for t, v in b.items()}})


def test_verdict_follows_the_synthetic_results():
    claim = {"low": 0}  # "b beats a"
    overlapping = paired_bootstrap(synthetic(shift=2, spread=30, n=8)).diff("b", "a")
    assert overlapping.lo < 0 < overlapping.hi
    verdict = judge(overlapping, **claim)
    assert verdict.verdict == INCONCLUSIVE and verdict.needed > 8
    assert judge(paired_bootstrap(synthetic(shift=-20, spread=5, n=8)).diff("b", "a"), **claim).verdict == CONTRADICTED
    assert judge(paired_bootstrap(synthetic(shift=20, spread=5, n=8)).diff("b", "a"), **claim).verdict == REPRODUCED


def test_combine_over_cells():
    yes, no, maybe = Verdict(REPRODUCED), Verdict(CONTRADICTED), Verdict(INCONCLUSIVE, 30, "for")
    assert combine([yes, yes]) == yes
    assert combine([yes, no, maybe]) == no
    assert combine([yes, maybe, Verdict(INCONCLUSIVE, 50, "for")]) == Verdict(INCONCLUSIVE, 50, "for")
    assert combine([maybe, Verdict(INCONCLUSIVE, None, "for")]) == Verdict(INCONCLUSIVE, None, "for")


def test_an_all_of_claim_is_settled_by_the_comparisons_against_it():
    """Synthetic: b beats a (the claim 'a beats every other' leans against), c and d lean for it, each undecided."""
    base, swing = np.linspace(30, 70, 12), np.array([1.0, -1.0] * 6)
    data = table({"a": {"t": list(base)}, "b": {"t": list(base + 3 + 10 * swing)},
                  "c": {"t": list(base - 1 + 25 * swing)}, "d": {"t": list(base - 2 + 30 * swing[::-1])}})
    boot = paired_bootstrap(data)
    each = {m: judge(boot.diff("a", m), low=0) for m in "bcd"}
    assert {m: v.leans for m, v in each.items()} == {"b": "against", "c": "for", "d": "for"}
    assert all(v.verdict == INCONCLUSIVE for v in each.values())
    claim = combine(each.values())
    assert claim == Verdict(INCONCLUSIVE, each["b"].needed, "against")
    assert claim.needed < max(v.needed for v in each.values())  # the old rule (largest of all) overstated it
    # two against: the first to resolve settles it
    two = combine([Verdict(INCONCLUSIVE, 40, "against"), Verdict(INCONCLUSIVE, 15, "against"), maybe_for(900)])
    assert two == Verdict(INCONCLUSIVE, 15, "against")


def maybe_for(n: int) -> Verdict:
    return Verdict(INCONCLUSIVE, n, "for")


def test_two_checkouts_in_different_folders_draw_the_same_resamples():
    rng = np.random.default_rng(9)
    scores = {u: {t: list(rng.uniform(0, 100, 6)) for t in ("t1", "t2")} for u in ("a", "b")}
    here = paired_bootstrap(table(scores, model="/home/one/cachecraft/data/models/tiny-ruler-llama"))
    there = paired_bootstrap(table(scores, model="/tmp/elsewhere/clone/data/models/tiny-ruler-llama"))
    assert np.array_equal(here.draws, there.draws)
    other = paired_bootstrap(table(scores, model="/tmp/elsewhere/clone/data/models/another-model"))
    assert not np.array_equal(here.draws, other.draws)  # the name still keys the stream


PREDICTIONS = [  # task, references, prediction
    ("niah_multikey_2", ["7311", "2215"], "The numbers are 7311 and 99"),  # 1 of 2 found: 50
    ("niah_multikey_2", ["4444"], " 4444\n"),
    ("vt", ["X1", "Y2", "Z3"], "x1 z3"),  # case-insensitive, 2 of 3
    ("vt", ["A"], ""),
    ("qa_1", ["Paris", "paris, France"], "It is Paris."),  # any reference: 100
    ("qa_1", ["Rome"], "Milan"),
]


def write_result(folder, method: str, ratio: float, predictions=PREDICTIONS, tamper: bool = False) -> dict:
    df = pd.DataFrame([{"task": t, "answer": refs, "predicted_answer": p} for t, refs, p in predictions])
    scores = score(df)
    if tamper:
        scores["vt"] += 5
    result = {"config": {"model": "m", "length": 1024, "method": method, "ratio": ratio}, "scores": scores,
              "aggregate": scores["aggregate"],
              "predictions": [{"index": i, "task": t, "answer": refs, "predicted_answer": p, "seconds": 0.1}
                              for i, (t, refs, p) in enumerate(predictions)]}
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result))
    return result


def test_sample_scores_reproduce_the_stored_scores(tmp_path):
    stored = write_result(tmp_path / "cell_a", "frc", 0.88)
    samples = load_samples(tmp_path)
    assert list(samples.score) == pytest.approx([50, 100, 200 / 3, 0, 100, 0])
    means = samples.groupby("task").score.mean()
    for task, value in stored["scores"].items():
        if task != "aggregate":
            assert means[task] == pytest.approx(value, abs=0.005)
    est = paired_bootstrap(samples).mean("cell_a")
    assert est.point == pytest.approx(stored["aggregate"], abs=0.01)
    assert est.lo <= est.point <= est.hi
    assert sample_score("qa_1", "no", ["yes"]) == 0 and sample_score("vt", "a b", ["A", "B"]) == 100


def test_corrupt_or_inconsistent_results_are_skipped_with_a_warning(tmp_path):
    write_result(tmp_path / "good", "frc", 0.88)
    write_result(tmp_path / "tampered", "snapkv", 0.88, tamper=True)
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "result.json").write_text('{"config": {"model": "m"')
    with pytest.warns(CorruptResultWarning) as caught:
        samples = load_samples(tmp_path)
    assert set(samples.cell) == {"good"}
    text = " ".join(str(w.message) for w in caught)
    assert "tampered" in text and "vt" in text and "torn" in text
    assert set(load_samples(tmp_path / "good" / "..", cells=["good"]).cell) == {"good"}


def test_a_rank_correlation_over_programs_gets_a_bootstrap_interval():
    from cachecraft_lib.stats.intervals import over_rows

    rng = np.random.default_rng(3)
    x = rng.normal(size=60)
    frame = pd.DataFrame({"x": x, "y": x + rng.normal(0, 1.0, 60)})
    rho = over_rows(frame, lambda f: f.x.rank().corr(f.y.rank()), resamples=500)
    assert 0.3 < rho.lo < rho.point < rho.hi < 0.9 and rho.n == 60
    again = over_rows(frame, lambda f: f.x.rank().corr(f.y.rank()), resamples=500)
    assert again == rho  # seeded
    noise = over_rows(frame.assign(y=rng.normal(size=60)), lambda f: f.x.rank().corr(f.y.rank()), resamples=500)
    assert noise.lo < 0 < noise.hi
    assert not over_rows(frame.head(2), lambda f: 0.0).defined
