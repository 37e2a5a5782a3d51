"""docs/uncertainty.md's five-line recipe for the search's pooled gain over FRC gives ``seed_pool``'s numbers, on
a file written here and on the committed notebook 08 file (against the committed table)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.paths import REPO
from cachecraft_lib.report import figures as report
from cachecraft_lib.search.seed_pool import pool_seeds

DOC = REPO / "docs" / "uncertainty.md"


def run_recipe(folder: Path, column: str | None = None, samples: str = "08_search_arena") -> tuple[float, float, float]:
    block = re.search(r"## Recompute the search's gain over FRC yourself.*?```python\n(.*?)```", DOC.read_text(),
                      re.S).group(1)
    assert len(block.strip().splitlines()) == 5
    if column:  # one seed's row, as the doc says: keep only its column
        block = block.replace('c.startswith("search-")', f'c == "{column}"')
    block = block.replace("08_search_arena.csv.gz", f"{samples}.csv.gz")  # another board's file, as the doc says
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(folder):
        exec(block, {})
    gain, lo, hi = (float(x) for x in out.getvalue().split())  # any float format: 0.0, -1e-05, nan
    return gain, lo, hi


def _units(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    return frame[frame.method == name][["context_id", "task", "overall"]]


def test_the_recipe_gives_the_pooled_gain_and_each_seeds(tmp_path):
    rng = np.random.default_rng(4)
    ids = [(f"1024/{t}/{i}", t) for t in ("qa_1", "niah_single_1", "vt") for i in range(17)]
    frc = rng.uniform(0.2, 0.9, len(ids))
    rows = [{"context_id": c, "task": t, "overall": float(v), "method": m, "split": "test"}
            for m, shift in (("frc", 0.0), ("search-v1-0", 0.05), ("search-v1-1", -0.01))
            for (c, t), v in zip(ids, frc + shift + rng.normal(0, 0.08, len(ids)), strict=True)]
    frame = pd.DataFrame(rows).sample(frac=1, random_state=1)  # the file's row order does not matter
    report.save_samples(frame, "08_search_arena", tmp_path / "figures")
    names = {0: "search-v1-0", 1: "search-v1-1"}
    pool = pool_seeds({s: _units(frame, n) for s, n in names.items()}, names, _units(frame, "frc"), "frc", 0.005)
    assert run_recipe(tmp_path) == pytest.approx((pool.pooled_gain, pool.pooled_lo, pool.pooled_hi), abs=1e-6)
    one = pool.per_seed.set_index("name").loc["search-v1-1"]
    assert run_recipe(tmp_path, "search-v1-1") == pytest.approx((one.gain, one.lo, one.hi), abs=1e-6)


@pytest.mark.parametrize("board", ["A", "B_offline"])
def test_the_committed_file_reproduces_the_committed_table(board):
    out = "" if board == "A" else f"_{board}"  # notebook 08's names: board A's plain, another board's carry it
    if not (REPO / "figures" / "samples" / f"08_search_arena{out}.csv.gz").is_file():
        pytest.skip(f"notebook 08's board {board} file is not committed yet (notebook 08 at the cpu profile)")
    table = pd.read_csv(REPO / "figures" / f"table_search_arena_gains{out}.csv")
    test = table[table.split.str.startswith("test") & (table.against == "frc")].set_index("random_seed")
    pooled = test.loc["pooled"]
    found = run_recipe(REPO, samples=f"08_search_arena{out}")
    assert found == pytest.approx((pooled.gain, pooled.lo, pooled.hi), abs=1e-4)  # the table: 4 decimals
    seeds = [s for s in test.index if str(s).isdigit()]  # the per-seed rows (not "pooled", not "a run")
    assert len(seeds) >= 2
    for seed in seeds:
        row = test.loc[seed]
        found = run_recipe(REPO, f"search-v1-{seed}", samples=f"08_search_arena{out}")
        assert found == pytest.approx((row.gain, row.lo, row.hi), abs=1e-4)


def test_the_recipe_prints_three_numbers_when_the_interval_is_exactly_zero(tmp_path):
    """A program that keeps what FRC keeps scores the same on every unit: numpy prints such an interval as
    ``[0. 0.]``, which once read as one number and failed CI. The recipe prints three plain floats."""
    rows = [{"context_id": f"1024/vt/{i}", "task": "vt", "overall": 0.5, "method": m, "split": "test"}
            for m in ("frc", "search-v1-0") for i in range(9)]
    report.save_samples(pd.DataFrame(rows), "08_search_arena", tmp_path / "figures")
    assert run_recipe(tmp_path) == (0.0, 0.0, 0.0)
