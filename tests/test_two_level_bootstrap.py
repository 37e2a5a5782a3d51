"""The two-level bootstrap (stats.two_level): seeds, then units within tasks, paired; its verdicts; the seed pool's
``a run`` row; and docs/uncertainty.md's recipe for it, run on a file written here."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.paths import REPO
from cachecraft_lib.report import figures as report
from cachecraft_lib.search.seed_pool import RUN_ROW, pool_seeds, row_verdict
from cachecraft_lib.stats import two_level

TASKS = ("qa_1", "niah_single_1", "vt")


def _units(n: int = 15, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = [(f"1024/{t}/{i}", t) for t in TASKS for i in range(n)]
    return pd.DataFrame({"context_id": [c for c, _ in ids], "task": [t for _, t in ids],
                         "overall": rng.uniform(0.2, 0.9, len(ids))})


def _seeds(ref: pd.DataFrame, offsets: list[float], noise: float = 0.03, seed: int = 1) -> dict[int, pd.DataFrame]:
    """Each seed's program: the reference plus the seed's own offset (seed variance) plus unit noise."""
    rng = np.random.default_rng(seed)
    return {s: ref.assign(overall=ref.overall + o + rng.normal(0, noise, len(ref))) for s, o in enumerate(offsets)}


def _diffs(seeds: dict[int, pd.DataFrame], ref: pd.DataFrame) -> pd.DataFrame:
    return two_level.diffs_table({f"search-v1-{s}": f for s, f in seeds.items()}, {f"search-v1-{s}": ref for s in seeds})


def test_with_seed_variance_the_run_interval_is_wider_than_one_over_units_only():
    """Five seeds landing far apart: resampling units alone (the seeds fixed, the old pooled row) gives a narrow
    interval; a run's interval must carry the spread between seeds."""
    ref = _units()
    seeds = _seeds(ref, [0.20, -0.05, 0.10, -0.15, 0.02])
    run = two_level.run_gain(_diffs(seeds, ref))
    pool = pool_seeds(seeds, {s: f"search-v1-{s}" for s in seeds}, ref, "frc", 0.005)
    assert run.seed_level and run.seeds == 5 and run.units == len(ref)
    assert run.point == pytest.approx(pool.pooled_gain, abs=1e-12) == pytest.approx(0.024, abs=0.01)
    assert (run.hi - run.lo) > 3 * (pool.pooled_hi - pool.pooled_lo)
    assert run.lo < 0 < run.hi and pool.pooled_lo > 0  # the seeds fixed would call it a gain; a run: inconclusive
    assert two_level.verdict(run) == two_level.INCONCLUSIVE
    assert pool.run == run  # the seed pool's ``a run`` row is this interval


def test_without_seed_variance_the_two_levels_agree_with_units_only_in_width():
    """Five seeds that found the same program: resampling seeds changes nothing, only the units' draw remains."""
    ref = _units(n=30)
    same = _seeds(ref, [0.05], noise=0.05)[0]
    seeds = {s: same for s in range(5)}
    run = two_level.run_gain(_diffs(seeds, ref))
    pool = pool_seeds(seeds, {s: f"search-v1-{s}" for s in seeds}, ref, "frc", 0.005)
    assert (run.hi - run.lo) == pytest.approx(pool.pooled_hi - pool.pooled_lo, rel=0.25)
    assert two_level.verdict(run, 0.005) == two_level.PASSES


def test_the_comparison_is_paired_the_same_unit_draw_for_program_and_comparator():
    """A program one constant above its comparator on every unit gains exactly that constant in every resample,
    however much the units vary: an unpaired draw would give a wide interval."""
    ref = _units(seed=3)
    seeds = {s: ref.assign(overall=ref.overall + 0.07) for s in range(4)}
    run = two_level.run_gain(_diffs(seeds, ref))
    assert run.lo == pytest.approx(0.07, abs=1e-12) and run.hi == pytest.approx(0.07, abs=1e-12)


def test_one_seed_is_never_silently_a_run():
    ref = _units()
    seeds = _seeds(ref, [0.2])
    run = two_level.run_gain(_diffs(seeds, ref))
    assert not run.seed_level and run.note == two_level.ONE_SEED_NOTE and two_level.ONE_SEED_NOTE in str(run)
    assert two_level.verdict(run, 0.005).startswith(two_level.PASSES) and "one seed" in two_level.verdict(run, 0.005)
    rows = pool_seeds(seeds, {0: "search-v1-0"}, ref, "frc", 0.005).rows("test")
    assert rows[-1]["random_seed"] == RUN_ROW and "one seed" in row_verdict(rows[-1], 0.005)


def test_verdicts_pass_fail_or_stay_inconclusive():
    def gain(lo, hi):
        return two_level.RunGain((lo + hi) / 2, lo, hi, 5, 30, True)

    assert [two_level.verdict(gain(0.01, 0.2)), two_level.verdict(gain(-0.3, -0.1)), two_level.verdict(gain(-0.1, 0.1)),
            two_level.verdict(gain(-0.015, 0.1), -0.02), two_level.verdict(gain(0.0, 0.2))] == \
        ["passes", "fails", "inconclusive", "passes", "inconclusive"]


def test_a_comparator_per_seed_and_units_that_do_not_pair_are_refused():
    ref = _units()
    seeds = _seeds(ref, [0.1, 0.0, 0.05])
    controls = _seeds(ref, [0.1, 0.0, 0.05], seed=9)  # random search with each seed: near each seed's program
    names = {s: f"search-v1-{s}" for s in seeds}
    own = pool_seeds(seeds, names, controls, "random search", 0.005)
    assert abs(own.run.point) < 0.02 and own.run.lo < 0 < own.run.hi
    with pytest.raises(ValueError, match="same"):
        two_level.diffs_table({"a": ref.iloc[:20]}, {"a": ref})


def _recipe(folder, comparator: str | None = None) -> tuple[float, float, float]:
    text = (REPO / "docs" / "uncertainty.md").read_text()
    block = re.search(r"## Recompute what a run of the search gains.*?```python\n(.*?)```", text, re.S).group(1)
    if comparator:
        block = block.replace('u["frc"]', comparator)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(folder):
        exec(block, {})
    return tuple(float(x) for x in out.getvalue().split())


def test_the_docs_recipe_recomputes_the_run_row_from_the_per_unit_file(tmp_path):
    ref, seed_program = _units(n=11), _units(n=11, seed=5)
    seeds = _seeds(ref, [0.12, -0.04, 0.05, 0.0, 0.08])
    controls = _seeds(ref, [0.01, 0.02, -0.01, 0.0, 0.03], seed=7)
    rows = [ref.assign(method="frc"), seed_program.assign(method="seed-v1")]
    rows += [f.assign(method=f"search-v1-{s}") for s, f in seeds.items()]
    rows += [f.assign(method=f"random-v1-{s}") for s, f in controls.items()]
    frame = pd.concat(rows, ignore_index=True).assign(split="test").sample(frac=1, random_state=2)
    report.save_samples(frame, "08_search_arena", tmp_path / "figures")
    names = {s: f"search-v1-{s}" for s in seeds}
    for comparator, reference in [(None, ref), ('u["seed-v1"]', seed_program),
                                  ('u[c.replace("search-", "random-")]', controls)]:
        run = pool_seeds(seeds, names, reference, "x", 0.005).run
        assert _recipe(tmp_path, comparator) == pytest.approx((run.point, run.lo, run.hi), abs=1e-9)


def test_on_the_committed_board_a_file_a_run_is_below_frc_and_wider_than_the_seeds_fixed_row():
    """docs/uncertainty.md and docs/board_fitness.md quote these: issue 56's five committed seeds, resampled."""
    if not (REPO / "figures" / "samples" / "08_search_arena.csv.gz").is_file():
        pytest.skip("notebook 08's board A file is not committed")
    units = pd.read_csv(REPO / "figures" / "samples" / "08_search_arena.csv.gz")
    of = {m: rows[["context_id", "task", "overall"]] for m, rows in units.groupby("method")}
    names = {s: f"search-v1-{s}" for s in range(5)}
    pool = pool_seeds({s: of[n] for s, n in names.items()}, names, of["frc"], "frc", 0.005)
    assert (pool.run.point, pool.run.lo, pool.run.hi) == pytest.approx((-0.092, -0.184, -0.017), abs=5e-4)
    assert _recipe(REPO) == pytest.approx((pool.run.point, pool.run.lo, pool.run.hi), abs=1e-9)
    assert pool.run.lo < pool.pooled_lo and pool.run.hi > pool.pooled_hi  # the seed level widens it
    assert two_level.verdict(pool.run, 0.005) == two_level.FAILS
