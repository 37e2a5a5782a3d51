"""Leaderboards derived from the ledger, never stored on their own: a table per board, Markdown/CSV, a figure.

Why derived: the ledger is the one append-only, hash-chained record (``ledger.Ledger``); a
leaderboard that is recomputed from it cannot drift from it, and an edited ledger line fails
``Ledger.events()`` before any leaderboard is drawn.

Scored events (``baseline``, ``submission``) carry in their payload: board, name, author, round, overall with
``lo``/``hi`` (95% interval over test units), the terms (accuracy, memory, memory_physical, speed, overhead),
``eligible``, ``moved`` (passed the gate against the board's best) and the gain's interval. ``points`` events
carry (board, name, author, points, rule); ``rejection`` events (board, name, author, kind, message);
``review`` events (board, name, judge, novelty, effectiveness, soundness, flags, notes: ``judges.record``).
Each entry shows its latest review's scores and every flag any judge's latest review raised; a flagged
entry's points are 0 (``points.flagged``), whatever its points events sum to; ``points_rule`` names the
rule(s) that awarded them (``post`` or ``frozen_bar``, ``arena.points``).

Ranks are ranges (``rank_range``, ``intervals.rank_range``, the rule notebook 03 uses for FRC): an entry shares
its rank with every entry of the board whose paired difference to it has a 95% interval that includes 0. Each
pair is compared by the paired difference the ledger records with the later entry (``pairs``: the organiser
computes it from the private per-unit values, so anyone reading the ledger ranks alike), else over the test
units both have per-unit values for (``units``, e.g. ``units_loader(arena.root)``, which reads the ledger when
asked, so entries recorded after it was made are found); only a pair with neither (an older ledger read without
the private folder) falls back to the overlap of the two overall intervals (``rank_basis`` says which, per
entry: "paired", "overlap" or both). ``rank`` is the order of the point estimates.

``test_looks`` counts, per board and author, the ``test_look`` events: every evaluation of any program on a
round's test items (``Arena.run_test``), scored, refused or crashed alike. ``test_looks_by_plan`` counts them per
pre-registered plan and random seed as the plan's claim counts them (``plan_looks``: every look at the entry's
program whatever its tag or author, the plan author's tagged looks, others' tagged looks apart, looks after the
entry apart, and the plan's family); a plan recorded in the ledger shows each of its seeds, with 0 looks when
nothing was submitted; looks no plan holds (baselines, hand-made entries) are under ``NO_PLAN``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...stats.intervals import Interval
from .events import SCORED, Kind
from .ledger_fields import payload  # the one reader of an event's payload (also for malformed ones)
from .pairs import entry_id, recorded

COLUMNS = ["board", "rank", "rank_range", "shares_rank_with", "rank_basis", "name", "author", "kind", "overall", "lo", "hi", "accuracy", "memory", "memory_physical",
           "speed", "overhead", "eligible", "moved", "gain", "gain_lo", "gain_hi", "points", "novelty", "effectiveness",
           "soundness", "flags", "judge", "points_rule", "test_looks", "round", "entry_id", "time"]
PAIRED, OVERLAP = "paired difference over test units", "overlap of overall intervals"
UnitsOf = Callable[[str, str], "pd.DataFrame | None"]  # (board, name) -> that entry's per-unit test values
Pairs = Mapping[tuple, Interval]  # ((round, entry id a), (round, entry id b)) -> a - b as the ledger records it
JUDGED = ("novelty", "effectiveness", "soundness", "judge")
NO_PLAN = "no plan"  # plan_looks.NO_PLAN
PLAN_PREFIX = 16  # a plan is named by its hash's first 16 hex digits, as an entry's origin names it


def entries(events: Iterable[dict]) -> pd.DataFrame:
    """Every scored entry (baseline or submission), in ledger order, with its points (summed over events, 0 when
    a judge flagged it) and its latest review."""
    from .points import flagged

    events = list(events)
    rows, points, reviews, rules = [], {}, {}, {}
    for event in events:
        kind, data = event.get("kind"), payload(event)
        if kind in SCORED:
            rows.append({**{c: data.get(c) for c in COLUMNS}, "kind": kind, "entry_id": entry_id(event),
                         "time": event.get("time", data.get("time"))})
        elif kind == Kind.POINTS:
            key = (data.get("board"), data.get("name"))
            points[key] = points.get(key, 0.0) + float(data.get("points", 0.0))
            rules.setdefault(key, []).append(str(data.get("rule", "")))
        elif kind == Kind.REVIEW:
            reviews[(data.get("board"), data.get("name"))] = data
    flags = flagged(events)
    table = pd.DataFrame(rows, columns=COLUMNS)
    keys = list(zip(table.board, table.name, strict=True))
    table["points"] = [0.0 if k in flags else points.get(k, 0.0) for k in keys]
    for column in JUDGED:
        table[column] = [reviews.get(k, {}).get(column) for k in keys]
    table["flags"] = [", ".join(flags.get(k, ())) for k in keys]
    table["points_rule"] = [", ".join(dict.fromkeys(r for r in rules.get(k, ()) if r)) for k in keys]
    looks = test_looks(events).set_index(["board", "author_key"]).looks.to_dict()
    table["test_looks"] = [looks.get((b, _author_key(a)), 0) for b, a in zip(table.board, table.author, strict=True)]
    return table


def _author_key(author: object) -> str:
    from ..submissions.identity import author_key

    return author_key(str(author or ""))


def test_looks(events: Iterable[dict]) -> pd.DataFrame:
    """Per (board, author): how many times a program was evaluated on a round's test items (``test_look``)."""
    rows = [{"board": payload(e).get("board"), "author_key": _author_key(payload(e).get("author_key")
                                                                          or payload(e).get("author")),
             "author": payload(e).get("author")} for e in events if e.get("kind") == Kind.TEST_LOOK]
    table = pd.DataFrame(rows, columns=["board", "author_key", "author"])
    return table.groupby(["board", "author_key"], as_index=False).agg(author=("author", "first"),
                                                                     looks=("author", "size"))


def test_looks_by_plan(events: Iterable[dict]) -> pd.DataFrame:
    """Per (board, plan, random seed): the test looks of each recorded plan and seed, counted as its claim
    counts them (``plan_looks.looks_table``: the same ``count_looks``), with its family; tagged looks naming no
    recorded plan; the rest under ``NO_PLAN``. A pre-registered plan (and its family) has one look per seed."""
    from .plan_looks import looks_table

    return looks_table(events)


def reviews(events: Iterable[dict]) -> pd.DataFrame:
    """Every review in the ledger, in order: the judge's scores, flags and the effect on the entry's points."""
    cols = ["board", "name", "author", "judge", "novelty", "effectiveness", "soundness", "flags", "points_before",
            "points_after"]
    rows = [{c: payload(e).get(c) for c in cols} | {"time": e.get("time")} for e in events if e.get("kind") == Kind.REVIEW]
    table = pd.DataFrame(rows, columns=[*cols, "time"])
    table["flags"] = [", ".join(f or ()) for f in table["flags"]]
    return table


def rejections(events: Iterable[dict]) -> pd.DataFrame:
    rows = [{k: payload(e).get(k) for k in ("board", "name", "author", "kind", "message")} | {"time": e.get("time")}
            for e in events if e.get("kind") == Kind.REJECTION]
    return pd.DataFrame(rows, columns=["board", "name", "author", "kind", "message", "time"])


def leaderboard(events: Iterable[dict], board: str | None = None, units: UnitsOf | None = None) -> pd.DataFrame:
    """The standing of each board: the latest entry per (board, name), ranked by overall (eligible first), each
    rank a range over the entries it cannot be told apart from (see the module docstring)."""
    events = list(events)
    table = entries(events)
    if board is not None:
        table = table[table.board == board]
    if table.empty:
        return table
    latest = table.groupby(["board", "name"], sort=False).tail(1).copy()
    latest["eligible"] = latest.eligible.fillna(False).astype(bool)
    latest = latest.sort_values(["board", "eligible", "overall"], ascending=[True, False, False])
    latest["rank"] = latest.groupby("board").cumcount() + 1
    pairs = recorded(events)
    parts = [_rank_ranges(g, units, pairs) for _, g in latest.groupby("board", sort=False)]
    return pd.concat(parts).reset_index(drop=True)[COLUMNS]


def _rank_ranges(board: pd.DataFrame, units: UnitsOf | None, pairs: Pairs) -> pd.DataFrame:
    """Rank ranges within one board, eligible entries first (an ineligible entry ranks below them all)."""
    from ...stats.intervals import rank_range

    board = board.copy()
    offset, ranges, shared, basis = 0, {}, {}, {}
    for _, group in board.groupby("eligible", sort=False):  # already sorted: eligible first
        diffs_of, how = _differences(group, units, pairs)
        for name, diffs in diffs_of.items():
            best, worst, with_ = rank_range(diffs)
            ranges[name] = str(best + offset) if best == worst else f"{best + offset}-{worst + offset}"
            shared[name], basis[name] = ", ".join(with_), how[name]
        offset += len(group)
    board["rank_range"] = board.name.map(ranges)
    board["shares_rank_with"] = board.name.map(shared)
    board["rank_basis"] = board.name.map(basis)
    return board


def _differences(group: pd.DataFrame, units: UnitsOf | None,
                 pairs: Pairs) -> tuple[dict[str, dict], dict[str, str]]:
    """name -> {other: Interval of name - other}, and name -> how: paired where the ledger records the pair
    (``pairs``, the organiser's record: the same for anyone who reads the ledger), else over the test units both
    entries have values for wherever they do, else the overlap of the two overall intervals (an interval of the
    difference cannot be had without paired values)."""
    from .pairs import pair_interval

    board, names = str(group.board.iloc[0]), list(group.name)
    ids = {n: (r if pd.notna(r) else 1, e) for n, r, e in zip(group.name, group["round"], group.entry_id, strict=True)}
    frames = {n: units(board, n) for n in names} if units else {}
    frames = {n: f for n, f in frames.items() if f is not None and len(f)}

    def paired(a: str, b: str) -> Interval | None:
        if (ids[a], ids[b]) in pairs:
            return pairs[(ids[a], ids[b])]
        if a not in frames or b not in frames:
            return None
        return pair_interval(frames[a], frames[b])

    rows = group.set_index("name")

    def bound(name: str, column: str, missing: float) -> float:
        """An entry's interval end; an entry recorded without one cannot be told apart from any other."""
        value = pd.to_numeric(rows.loc[name, column], errors="coerce")
        return missing if pd.isna(value) else float(value)

    def overlap(a: str, b: str) -> Interval:
        lo = bound(a, "lo", -np.inf) - bound(b, "hi", np.inf)
        hi = bound(a, "hi", np.inf) - bound(b, "lo", -np.inf)
        return Interval(bound(a, "overall", np.nan) - bound(b, "overall", np.nan), lo, hi, 2)

    diffs, how = {}, {}
    for a in names:
        diffs[a] = {b: paired(a, b) for b in names if b != a}
        kinds = {PAIRED if d is not None else OVERLAP for d in diffs[a].values()} or {PAIRED if a in frames else OVERLAP}
        diffs[a] = {b: d if d is not None else overlap(a, b) for b, d in diffs[a].items()}
        how[a] = PAIRED if kinds == {PAIRED} else OVERLAP if kinds == {OVERLAP} else f"{PAIRED} where both have them"
    return diffs, how


def units_loader(root: str | Path, round_: int = 1, events: list[dict] | None = None) -> UnitsOf:
    """Per-unit test values as the harness keeps them: under its ledger id, ``<root>/private/round<r>/<board>/``
    ``baseline-<name>.parquet`` or ``entry-<seq>.parquet`` for the latest entry of that name (the one the
    leaderboard shows); an entry without a file gives None (then the board falls back to interval overlap).
    ``events``: the ledger as already read (the site's, verified or not), else ``<root>/ledger.jsonl`` read when
    asked (each read verifies only new lines)."""
    from .ledger import Ledger
    from .pairs import latest_entries

    base = Path(root) / "private" / f"round{round_}"
    ledger = Ledger(Path(root) / "ledger.jsonl") if events is None else None

    def load(board: str, name: str) -> pd.DataFrame | None:
        entry_id = latest_entries(ledger.events() if ledger else events or [], board, round_).get(name)
        path = base / board / f"{entry_id}.parquet"
        return pd.read_parquet(path) if entry_id and path.is_file() else None

    return load


def write(events: Iterable[dict], out_dir: str | Path | None = None, label: str | None = None,
          name: str = "table_arena_leaderboard", units: UnitsOf | None = None) -> list[Path]:
    """The leaderboard as CSV + Markdown + LaTeX (``report.save_table``) and the figure ``fig_arena_leaderboard``."""
    from ...report import figures as report
    from ...report.plots.arena import plot_leaderboard

    events = list(events)
    board = leaderboard(events, units=units)
    shown = board.drop(columns=["time", "entry_id"]).round(3)
    caption = ("Arena leaderboard, derived from the ledger (overall with its 95% interval over hidden test units; "
               "rank_range: shared where the difference's interval includes 0; points_rule: the rule that awarded "
               "the points)")
    paths = list(report.save_table(shown.set_index(["board", "rank"]), name, out_dir=out_dir, caption=caption,
                                   label=label) or [])
    fig = plot_leaderboard(board)
    paths += report.savefig("fig_arena_leaderboard", fig, out_dir=out_dir, label=label)
    plt.close(fig)
    return paths

