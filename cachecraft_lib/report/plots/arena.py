"""The arena leaderboard's figure: one panel per board, each entry's overall score with its 95% interval.

Why labels sit on the y axis: a note drawn at the bar's end ("not eligible") lies inside the interval, so it
overprinted the whisker; a tick label never meets the data. An entry's notes join its name there.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .values import as_plotted

BASELINE, SUBMISSION = "#7f7f7f", "#d62728"


def entry_label(row: pd.Series) -> str:
    """``name``, then what a reader must know beside its bar: not eligible, flagged (and by what)."""
    notes = [] if bool(row.get("eligible", True)) else ["not eligible"]
    flags = row.get("flags")
    if isinstance(flags, str) and flags:
        notes.append(f"flagged: {flags}")
    return f"{row['name']} ({'; '.join(notes)})" if notes else str(row["name"])


def plot_leaderboard(board: pd.DataFrame) -> plt.Figure:
    """One panel per board: overall with its interval, baselines grey, submissions red; ineligible and flagged
    entries named so in their tick labels (nothing is written over a bar or a whisker)."""
    board = as_plotted(board, ("overall", "lo", "hi"))
    boards = list(dict.fromkeys(board.board)) or ["(empty)"]
    fig, axes = plt.subplots(1, len(boards), figsize=(5.2 * len(boards), 0.35 * max(4, len(board)) + 1.2),
                             squeeze=False)
    for ax, name in zip(axes[0], boards, strict=True):
        rows = board[board.board == name].iloc[::-1]
        y = list(range(len(rows)))
        ax.barh(y, rows.overall, color=[BASELINE if k == "baseline" else SUBMISSION for k in rows.kind])
        for i, (_, r) in zip(y, rows.iterrows(), strict=True):
            if pd.notna(r.lo):
                ax.plot([r.lo, r.hi], [i, i], color="black", lw=1)
        ax.set_yticks(y, [entry_label(r) for _, r in rows.iterrows()], fontsize=8)
        ax.set_title(f"board {name}")
        ax.set_xlabel("overall score (95% interval)")
    fig.tight_layout()
    return fig
