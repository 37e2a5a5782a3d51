"""Notebook 08's dynamics figure carries FRC's dev score on the search half as a labelled reference line (issue
48: the figure had no FRC line), and redraws from the committed generations table."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cachecraft_lib.report.plots.search_arena import generations_from_table, plot_search_arena_dynamics  # noqa: E402

TABLE = Path(__file__).resolve().parents[1] / "figures" / "table_search_arena_generations.csv"


def test_the_committed_generations_table_redraws_with_an_frc_line():
    table = pd.read_csv(TABLE)
    gens = generations_from_table(table)
    seeds = sorted(gens.random_seed.unique())
    assert seeds == [0, 1, 2, 3, 4] and len(gens) == len(seeds) * len(table)
    # a seed's column ends (NaN) where its search did: the halving engine's generations differ by seed
    assert gens[gens.random_seed == 1].best.dropna().tolist() == table["seed 1"].dropna().tolist()
    ax = plot_search_arena_dynamics(gens, "A", "title", frc=0.8)
    lines = {line.get_label(): line for line in ax.get_lines()}
    frc = [line for label, line in lines.items() if label.startswith("FRC")]
    assert len(frc) == 1 and frc[0].get_label().endswith(": 0.800")  # labelled with its value
    assert set(frc[0].get_ydata()) == {0.8}  # horizontal, at FRC's score
    assert any("FRC" in t.get_text() for t in ax.get_legend().get_texts())
    assert len([label for label in lines if label.startswith("random seed")]) == len(seeds)
    plt.close(ax.figure)
    ax = plot_search_arena_dynamics(gens, "A", "title")  # no reference given: no line claims to be FRC
    assert not [line for line in ax.get_lines() if line.get_label().startswith("FRC")]
    plt.close(ax.figure)
