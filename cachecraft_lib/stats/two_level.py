"""What a run of the search gains: a two-level paired bootstrap, seeds first, then test units within tasks.

Why: a search run's result depends on its random seed (issue 56: two seeds of one plan landed 0.26 apart on board
A), so an interval that resamples test units with the seeds fixed describes those seeds' programs, not the next
run. ``run_gain`` resamples both levels: in each resample the random seeds are drawn with replacement, then each
task's test units are drawn with replacement, and the same unit draw applies to every seed and to both sides of
each difference (the program and its comparator on the same unit), so what they share cancels.

``diffs`` holds, per test unit (index: task, context_id, sorted) and per random seed (one column each, in the
order given), the seed's program minus its comparator on that unit; a comparator may differ by seed (random search
run with the same seed) or not (FRC, the seed program). A resample's gain is the mean over drawn seeds of the mean
over tasks of the task's mean difference over drawn units; the point is the same with no resampling. The streams
are ``intervals.stratum_rng(seed, ("seeds",), S)`` and ``stratum_rng(seed, ("units", task), n)``, so plain numpy
recomputes it (docs/uncertainty.md).

With fewer than two seeds there is no seed level to resample: the interval is over units only, and the result
says so (``seed_level`` False, ``note``, and the verdict's words): it is never silently the narrower interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .intervals import LEVEL, RESAMPLES, resample_counts, stratum_rng

ONE_SEED_NOTE = "one seed: units resampled only, the interval says nothing about another run of the search"
PASSES, FAILS, INCONCLUSIVE = "passes", "fails", "inconclusive"


@dataclass(frozen=True)
class RunGain:
    """A run's gain over a comparator: point, interval, how many seeds and units it rests on, and whether the
    seeds were resampled."""

    point: float
    lo: float
    hi: float
    seeds: int
    units: int
    seed_level: bool

    @property
    def note(self) -> str:
        return "" if self.seed_level else ONE_SEED_NOTE

    def __str__(self) -> str:
        text = f"{self.point:+.3f} [{self.lo:+.3f}, {self.hi:+.3f}] over {self.seeds} seeds x {self.units} units"
        return text + (f" ({self.note})" if self.note else "")


def run_gain(diffs: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> RunGain:
    """The two-level bootstrap of ``diffs`` (module doc): seeds, then units within tasks, one unit draw for all."""
    if diffs.empty or diffs.shape[1] == 0:
        raise ValueError("run_gain: no seeds or no units")
    if diffs.isna().any().any():
        raise ValueError("run_gain: a seed lacks a unit another seed has (or a comparator does): cannot pair")
    tasks = diffs.index.get_level_values("task")
    by_task = [(t, diffs[tasks == t].to_numpy(dtype=float)) for t in sorted(set(tasks))]
    n_seeds = diffs.shape[1]
    within = np.zeros((resamples, n_seeds))
    for task, values in by_task:
        counts = resample_counts(stratum_rng(seed, ("units", task), len(values)), len(values), resamples)
        within += counts @ values / len(values)
    within /= len(by_task)
    weights = resample_counts(stratum_rng(seed, ("seeds",), n_seeds), n_seeds, resamples)
    draws = (weights * within).sum(axis=1) / n_seeds
    point = float(np.mean([values.mean(axis=0) for _, values in by_task], axis=0).mean())
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return RunGain(point, float(lo), float(hi), n_seeds, len(diffs), n_seeds >= 2)


def verdict(gain: RunGain, threshold: float = 0.0) -> str:
    """The three-valued verdict on "a run gains more than ``threshold``": passes (lower end above it), fails
    (upper end below it), inconclusive (the interval allows both); with one seed the words say so."""
    if math.isnan(gain.lo) or math.isnan(gain.hi):
        word = INCONCLUSIVE
    else:
        word = PASSES if gain.lo > threshold else (FAILS if gain.hi < threshold else INCONCLUSIVE)
    return word if gain.seed_level else f"{word} ({ONE_SEED_NOTE})"


def diffs_table(programs: dict[str, pd.DataFrame], comparators: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """``run_gain``'s input from per-seed unit rows (``context_id``, ``task``, ``overall``): ``programs[seed]``
    minus ``comparators[seed]`` (the same frame for every seed when the comparator does not depend on it); columns
    in sorted seed-name order, rows by (task, context_id). Every seed must be scored on the same units."""
    columns = {}
    for name in sorted(programs):
        mine, theirs = _indexed(programs[name]), _indexed(comparators[name])
        if set(mine.index) != set(theirs.index):
            raise ValueError(f"{name} and its comparator were not scored on the same test units")
        columns[name] = mine - theirs.reindex(mine.index)
    table = pd.concat(columns, axis=1).sort_index()
    if table.isna().any().any():
        raise ValueError("the seeds' programs were not all scored on the same test units")
    return table


def _indexed(units: pd.DataFrame) -> pd.Series:
    return units.set_index(["task", "context_id"]).overall.astype(float)
