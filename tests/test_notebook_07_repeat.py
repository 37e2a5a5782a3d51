"""Notebook 07 twice under the smoke profile: the public demonstration secret draws the same test items, so every
table (and the per-unit file) comes out byte-identical (about 6 minutes on two cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachecraft_lib.report.notebooks import list_notebooks, run_notebook


@pytest.mark.slow
def test_notebook_07_regenerates_its_tables_exactly(tmp_path):
    book = list_notebooks(["07"])[0]
    outputs = []
    for run in ("one", "two"):
        figures = tmp_path / run / "f"
        run_notebook(book, "smoke", out_dir=tmp_path / run, figures=figures,
                     parameters={"ROOT": str(tmp_path / run / "arena")})
        outputs.append({p.relative_to(figures): p.read_bytes() for p in sorted(figures.rglob("*"))
                        if p.suffix in (".csv", ".md", ".tex", ".gz")})
    one, two = outputs
    assert Path("table_arena_leaderboard.csv") in one and Path("samples/07_arena.csv.gz") in one
    assert sorted(one) == sorted(two)
    differ = [str(p) for p in one if one[p] != two[p]]
    assert not differ, f"tables differ between two runs: {differ}"
    assert b"PUBLIC demonstration secret" in one[Path("table_arena_leaderboard.md")]
