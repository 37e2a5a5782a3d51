"""Notebook 08's search dynamics on a board's dev items, with FRC's score on the same items as a reference line.

Why the line: without it a reader cannot tell whether a climb from 0.41 to 0.86 reaches the board's known
strong method or stops short of it (issue 48). The reference is FRC's example submission scored on the same
search half of the dev items (``selection.half_score``), never on test items.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

FRC_COLOR = "#444444"


def plot_search_arena_dynamics(gens: pd.DataFrame, board: str, title: str, frc: float | None = None,
                               ax: plt.Axes | None = None) -> plt.Axes:
    """Best search-half fitness so far per generation, one line per random seed (``gens``: generation, best,
    random_seed), and ``frc`` (FRC's dev overall on the same search half) as a labelled horizontal line."""
    ax = ax or plt.subplots(figsize=(7.5, 3.2))[1]
    for seed, g in gens.groupby("random_seed"):
        ax.plot(g.generation, g.best, marker="o", label=f"random seed {seed}: best search-half fitness so far")
    if frc is not None:
        ax.axhline(frc, color=FRC_COLOR, ls="--", lw=1.2, label=f"FRC (example submission) on the search half: {frc:.3f}")
    ax.set_xlabel("generation")
    ax.set_ylabel(f"board {board} dev overall (search half)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside: no curve hidden
    ax.set_title(title, fontsize=9)
    return ax


def generations_from_table(table: pd.DataFrame) -> pd.DataFrame:
    """``table_search_arena_generations.csv`` (generation, ``seed <n>`` columns) back to long form (generation,
    random_seed, best): the committed table redraws the figure."""
    seeds = [c for c in table.columns if c.startswith("seed ")]
    long = table.melt(id_vars="generation", value_vars=seeds, var_name="random_seed", value_name="best")
    long["random_seed"] = long.random_seed.str.removeprefix("seed ").astype(int)
    return long[["generation", "random_seed", "best"]]
