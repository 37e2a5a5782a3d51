"""The numpy recipe of docs/uncertainty.md recomputes an interval of the suite's bootstrap exactly, and the
committed per-sample files reproduce the committed cpu tables they come from."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.paper import analysis
from cachecraft_lib.paths import REPO
from cachecraft_lib.report import figures as report
from cachecraft_lib.stats.intervals import paired_bootstrap

DOC = REPO / "docs" / "uncertainty.md"
CELL = "ruler__1024__tiny-ruler-llama__frc__0.88__n12__seed42__offline"
SAMPLES = REPO / "figures" / "samples"


def recipe() -> str:
    block = re.search(r"## Recompute an interval yourself.*?```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len(block.strip().splitlines()) == 5
    return block


def run_recipe(folder) -> tuple[float, float, float]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(folder):
        exec(recipe(), {})
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", out.getvalue())]
    return numbers[0], numbers[1], numbers[2]


def test_the_recipe_gives_the_bootstraps_numbers(tmp_path):
    rng = np.random.default_rng(1)
    rows = [{"cell": cell, "model": "/somewhere/tiny-ruler-llama", "length": 1024, "method": "m", "ratio": 0.88,
             "task": task, "index": i, "score": float(rng.choice([0.0, 50.0, 100.0]))}
            for cell in (CELL, "other") for task in ("niah_single_1", "vt", "qa_1") for i in range(12)]
    frame = pd.DataFrame(rows)
    report.save_samples(frame, "03_ruler_grid", tmp_path / "figures")
    est = paired_bootstrap(frame).mean(CELL)
    point, lo, hi = run_recipe(tmp_path)
    assert (point, lo, hi) == pytest.approx((est.point, est.lo, est.hi), abs=1e-6)  # numpy prints 8 digits
    assert lo < point < hi


def _committed(name: str) -> pd.DataFrame:
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"{path.name} is not committed yet (make reproduce at the cpu profile writes it)")
    return pd.read_csv(path)


def test_the_committed_grid_samples_reproduce_the_committed_r088_table():
    samples = _committed("03_ruler_grid.csv.gz")
    table = pd.read_csv(REPO / "figures" / "table_ruler_r088.csv")
    again = analysis.r088_table(samples)
    cols = ["no_press", "no_press_lo", "no_press_hi", "frc", "frc_lo", "frc_hi", "gain", "gain_lo", "gain_hi"]
    assert np.allclose(again[cols].to_numpy(float), table[cols].to_numpy(float), atol=1e-9, equal_nan=True)
    assert list(again.gain_verdict) == list(table.gain_verdict)
    row = table[(table.length == 1024)].iloc[0]
    assert run_recipe(REPO) == pytest.approx((row.frc, row.frc_lo, row.frc_hi), abs=1e-6)


def test_the_committed_grid_samples_reproduce_degradation_and_ranks():
    samples = _committed("03_ruler_grid.csv.gz")
    deg = pd.read_csv(REPO / "figures" / "table_degradation.csv").set_index("method")
    again = analysis.degradation_table(samples).set_index("method")
    assert np.allclose(again.loc[deg.index, ["lo", "hi"]].to_numpy(float), deg[["lo", "hi"]].to_numpy(float),
                       atol=1e-9)
    ranks = pd.read_csv(REPO / "figures" / "table_frc_rank.csv")
    methods = sorted(set(samples.method) - {"no_press"})
    assert list(analysis.rank_table(samples, methods).frc_rank_range.astype(str)) == list(ranks.frc_rank_range.astype(str))


def test_the_committed_decomposition_samples_reproduce_its_tables():
    samples = _committed("04_decomposition.csv.gz")
    table = pd.read_csv(REPO / "figures" / "table_scorer_vs_structure.csv").set_index("method")
    again = analysis.compare_with_paper(samples, list(table.index), 0.88, "decomposition")
    cols = ["here", "here_lo", "here_hi", "delta_vs_first_lo", "delta_vs_first_hi"]
    assert np.allclose(again[cols].to_numpy(float), table[cols].to_numpy(float), atol=1e-9, equal_nan=True)


def test_the_committed_latency_repeats_reproduce_the_latency_tables():
    from cachecraft_lib.paper import latency
    from cachecraft_lib.stats.timing import paper_hardware

    samples = _committed("06_latency.csv.gz")
    table = pd.read_csv(REPO / "figures" / "table_latency_ratios.csv")
    again = paper_hardware(latency.paper_comparison(samples), samples).round(3)
    assert np.allclose(again[["here", "lo", "hi"]].to_numpy(float), table[["here", "lo", "hi"]].to_numpy(float))
    assert list(again.verdict) == list(table.verdict)
    medians = pd.read_csv(REPO / "figures" / "table_latency.csv")
    assert np.allclose(latency.summarise(samples).median_ms.round(2), medians.median_ms)
