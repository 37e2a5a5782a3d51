"""Leaderboards derived from the ledger, never stored on their own: a table per board, Markdown/CSV, a figure.

Why derived: the ledger is the one append-only, hash-chained record (arena-core's ``ledger.Ledger``); a
leaderboard that is recomputed from it cannot drift from it, and an edited ledger line fails
``Ledger.events()`` before any leaderboard is drawn.

Scored events (``baseline``, ``submission``) carry in their payload: board, name, author, round, overall with
``lo``/``hi`` (95% interval over test units), the terms (accuracy, memory, memory_physical, speed, overhead),
``eligible``, ``moved`` (passed the gate against the board's best) and the gain's interval. ``points`` events
carry (board, name, author, points, rule); ``rejection`` events (board, name, author, kind, message);
``review`` events (board, name, judge, novelty, effectiveness, soundness, flags, notes: ``judges.record``).
Each entry shows its latest review's scores and every flag any judge's latest review raised; a flagged
entry's points are 0 (``points.flagged``), whatever its points events sum to.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

SCORED = ("baseline", "submission")
COLUMNS = ["board", "rank", "name", "author", "kind", "overall", "lo", "hi", "accuracy", "memory", "memory_physical",
           "speed", "overhead", "eligible", "moved", "gain", "gain_lo", "gain_hi", "points", "novelty", "effectiveness",
           "soundness", "flags", "judge", "round", "time"]
JUDGED = ("novelty", "effectiveness", "soundness", "judge")


def payload(event: dict) -> dict:
    """An event's payload, whether the ledger nests it (``{"kind", "payload", ...}``) or not."""
    return event.get("payload", event)


def entries(events: Iterable[dict]) -> pd.DataFrame:
    """Every scored entry (baseline or submission), in ledger order, with its points (summed over events, 0 when
    a judge flagged it) and its latest review."""
    from .points import flagged

    events = list(events)
    rows, points, reviews = [], {}, {}
    for event in events:
        kind, data = event.get("kind"), payload(event)
        if kind in SCORED:
            rows.append({**{c: data.get(c) for c in COLUMNS}, "kind": kind, "time": event.get("time", data.get("time"))})
        elif kind == "points":
            key = (data.get("board"), data.get("name"))
            points[key] = points.get(key, 0.0) + float(data.get("points", 0.0))
        elif kind == "review":
            reviews[(data.get("board"), data.get("name"))] = data
    flags = flagged(events)
    table = pd.DataFrame(rows, columns=COLUMNS)
    keys = list(zip(table.board, table.name, strict=True))
    table["points"] = [0.0 if k in flags else points.get(k, 0.0) for k in keys]
    for column in JUDGED:
        table[column] = [reviews.get(k, {}).get(column) for k in keys]
    table["flags"] = [", ".join(flags.get(k, ())) for k in keys]
    return table


def reviews(events: Iterable[dict]) -> pd.DataFrame:
    """Every review in the ledger, in order: the judge's scores, flags and the effect on the entry's points."""
    cols = ["board", "name", "author", "judge", "novelty", "effectiveness", "soundness", "flags", "points_before",
            "points_after"]
    rows = [{c: payload(e).get(c) for c in cols} | {"time": e.get("time")} for e in events if e.get("kind") == "review"]
    table = pd.DataFrame(rows, columns=[*cols, "time"])
    table["flags"] = [", ".join(f or ()) for f in table["flags"]]
    return table


def rejections(events: Iterable[dict]) -> pd.DataFrame:
    rows = [{k: payload(e).get(k) for k in ("board", "name", "author", "kind", "message")} | {"time": e.get("time")}
            for e in events if e.get("kind") == "rejection"]
    return pd.DataFrame(rows, columns=["board", "name", "author", "kind", "message", "time"])


def leaderboard(events: Iterable[dict], board: str | None = None) -> pd.DataFrame:
    """The standing of each board: the latest entry per (board, name), ranked by overall (eligible first)."""
    table = entries(list(events))
    if board is not None:
        table = table[table.board == board]
    if table.empty:
        return table
    latest = table.groupby(["board", "name"], sort=False).tail(1).copy()
    latest["eligible"] = latest.eligible.fillna(False).astype(bool)
    latest = latest.sort_values(["board", "eligible", "overall"], ascending=[True, False, False])
    latest["rank"] = latest.groupby("board").cumcount() + 1
    return latest.reset_index(drop=True)[COLUMNS]


def write(events: Iterable[dict], out_dir: str | Path | None = None, label: str | None = None,
          name: str = "table_arena_leaderboard") -> list[Path]:
    """The leaderboard as CSV + Markdown + LaTeX (``report.save_table``) and the figure ``fig_arena_leaderboard``."""
    from .. import report

    events = list(events)
    board = leaderboard(events)
    shown = board.drop(columns=["time"]).round(3)
    caption = "Arena leaderboard, derived from the ledger (overall with its 95% interval over hidden test units)"
    paths = list(report.save_table(shown.set_index(["board", "rank"]), name, out_dir=out_dir, caption=caption,
                                   label=label) or [])
    fig = plot_leaderboard(board)
    paths += report.savefig("fig_arena_leaderboard", fig, out_dir=out_dir, label=label)
    plt.close(fig)
    return paths


def plot_leaderboard(board: pd.DataFrame) -> plt.Figure:
    """One panel per board: overall with its interval, baselines grey, submissions coloured; ineligible and
    flagged entries marked."""
    boards = list(dict.fromkeys(board.board)) or ["(empty)"]
    fig, axes = plt.subplots(1, len(boards), figsize=(4.2 * len(boards), 0.35 * max(4, len(board)) + 1.2),
                             squeeze=False)
    for ax, name in zip(axes[0], boards, strict=True):
        rows = board[board.board == name].iloc[::-1]
        y = range(len(rows))
        colors = ["#7f7f7f" if k == "baseline" else "#d62728" for k in rows.kind]
        ax.barh(list(y), rows.overall, color=colors, hatch=None)
        for i, (_, r) in zip(y, rows.iterrows(), strict=True):
            if pd.notna(r.lo):
                ax.plot([r.lo, r.hi], [i, i], color="black", lw=1)
            if not r.eligible:
                ax.text(r.overall, i, "  not eligible", va="center", fontsize=7, color="#555555")
            if isinstance(r.get("flags"), str) and r["flags"]:
                ax.text(0, i, f" flagged: {r['flags']}", va="center", fontsize=7, color="white")
        ax.set_yticks(list(y), list(rows.name))
        ax.set_title(f"board {name}")
        ax.set_xlabel("overall score (95% interval)")
    fig.tight_layout()
    return fig
