"""Interval widths and decided comparisons at a smaller sample size, on synthetic per-sample results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.paper.precision import first_samples, precision_table

TASKS = ("niah_single_1", "vt", "qa_1")
GRID = {("no_press", 0.0): 80, ("frc", 0.5): 70, ("snapkv", 0.5): 70.5, ("chunkkv", 0.5): 40,
        ("frc", 0.8): 65, ("snapkv", 0.8): 50, ("chunkkv", 0.8): 55,
        ("frc", 0.88): 60, ("snapkv", 0.88): 30, ("chunkkv", 0.88): 35}


def samples(means: dict[tuple[str, float], float], n: int = 10, noise: float = 3.0) -> pd.DataFrame:
    """Per-sample scores: a difficulty per sample shared by every method, plus per-method noise."""
    rng = np.random.default_rng(0)
    rows = []
    for length in (1024, 2048):
        difficulty = {t: rng.normal(0, 15, n) for t in TASKS}
        for (method, ratio), mean in means.items():
            for task in TASKS:
                values = np.clip(mean + difficulty[task] + rng.normal(0, noise, n), 0, 100)
                rows += [{"cell": f"{length}_{method}_{ratio}", "model": "/x/tiny", "length": length,
                          "method": method, "ratio": ratio, "task": task, "index": i, "score": float(v)}
                         for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_first_samples_keeps_the_first_n_of_every_task():
    table = samples(GRID, n=12)
    sub = first_samples(table, 3)
    per_task = sub.groupby(["cell", "task"])["index"].agg(["count", "max"])
    assert (per_task["count"] == 3).all() and (per_task["max"] == 2).all()
    with pytest.raises(ValueError, match="n must be"):
        first_samples(table, 0)


def test_more_samples_narrow_the_intervals_and_decide_more_comparisons():
    table = precision_table(samples(GRID, n=12, noise=8.0), sizes=(3, 12)).set_index("samples_per_task")
    assert list(table.index) == [3, 12]
    assert table.loc[12, "aggregate_half_width"] < table.loc[3, "aggregate_half_width"]
    assert table.loc[12, "difference_half_width"] < table.loc[3, "difference_half_width"]
    assert table.loc[12, "decided"] >= table.loc[3, "decided"]
    # 3 compressed methods at 3 ratios and 2 lengths: 3 pairs each
    assert table.loc[12, "comparisons"] == 18


def test_sizes_beyond_the_results_are_skipped_or_refused():
    table = samples(GRID, n=4)
    assert list(precision_table(table, sizes=(3, 12)).samples_per_task) == [3]
    with pytest.raises(ValueError, match="fewer than"):
        precision_table(table, sizes=(12,))


def test_identical_methods_are_never_decided():
    table = samples({("no_press", 0.0): 80, ("frc", 0.5): 60}, n=6)
    twin = table[table.method == "frc"].assign(method="snapkv", cell=lambda d: d.cell.str.replace("frc", "snapkv"))
    row = precision_table(pd.concat([table, twin]), sizes=(6,)).iloc[0]
    assert row.comparisons == 2 and row.decided == 0 and row.difference_half_width == 0
