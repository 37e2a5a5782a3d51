"""How precise the grid's comparisons are at a sample size: interval widths and how many comparisons decide.

The grid's verdicts are only as good as their intervals. ``precision_table`` keeps the first ``n`` samples
of every task (the samples a smaller profile would have drawn: the generator's rows come in a fixed order)
and reports, per size, the median half-width of a cell's aggregate interval, the median half-width of a
paired difference between two methods at the same ratio, and the share of those differences whose interval
excludes 0 (a comparison the grid can decide). It is what says why the cpu profile runs 12 samples per task
rather than 3.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

import numpy as np
import pandas as pd

from ..stats.intervals import STRATA, paired_bootstrap
from .analysis import cells_of


def first_samples(samples: pd.DataFrame, n: int) -> pd.DataFrame:
    """The per-sample table restricted to the first ``n`` samples (by index) of every (model, length, task)."""
    if n < 1:
        raise ValueError(f"first_samples: n must be >= 1, got {n}")
    keep = (samples[list(STRATA) + ["index"]].drop_duplicates()
            .sort_values(list(STRATA) + ["index"])
            .groupby(list(STRATA), sort=False).head(n))
    return samples.merge(keep, on=list(STRATA) + ["index"], how="inner")


def _half(lo: float, hi: float) -> float:
    return (hi - lo) / 2 if np.isfinite(lo) and np.isfinite(hi) else np.nan


def precision_at(samples: pd.DataFrame, n: int) -> dict[str, float]:
    """Interval half-widths and the share of decided method-vs-method comparisons with ``n`` samples per task."""
    sub = first_samples(samples, n)
    cells, boot = cells_of(sub), paired_bootstrap(sub)
    aggregate = [_half(e.lo, e.hi) for e in (boot.mean(c) for c in cells.cell)]
    diffs = []
    compressed = cells[cells.method != "no_press"]
    for _, group in compressed.groupby(["model", "length", "ratio"]):
        for a, b in combinations(sorted(group.cell), 2):
            diffs.append(boot.diff(a, b))
    widths = [_half(d.lo, d.hi) for d in diffs]
    decided = [d.defined and (d.lo > 0 or d.hi < 0) for d in diffs]
    return {"samples_per_task": n, "cells": len(cells),
            "aggregate_half_width": float(np.nanmedian(aggregate)) if aggregate else np.nan,
            "difference_half_width": float(np.nanmedian(widths)) if widths else np.nan,
            "comparisons": len(diffs),
            "decided": int(sum(decided)),
            "decided_share": float(np.mean(decided)) if diffs else np.nan}


def precision_table(samples: pd.DataFrame, sizes: Iterable[int] = (3, 12)) -> pd.DataFrame:
    """One row per sample size (sizes above what the table holds are skipped), in RULER points."""
    available = int(samples.groupby(list(STRATA))["index"].nunique().min())
    rows = [precision_at(samples, n) for n in sizes if n <= available]
    if not rows:
        raise ValueError(f"precision_table: the results hold {available} samples per task, fewer than {list(sizes)}")
    return pd.DataFrame(rows)
