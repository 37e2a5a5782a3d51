"""Recording a scored submission: under the arena's lock, read the board's best, gate, append, award points.

Why one function under one lock: two ``arena submit`` at once must be gated one after the other, each against
the board's best at the moment it is recorded (otherwise both could "move" the board past the same old best).
``record_submission`` holds ``Ledger.lock`` (``fcntl.flock``) from reading the ledger through the gate to the
``submission`` and ``points`` appends; the expensive part (running the method on the test items) happens
before, outside it. The ledger itself stays one chain either way (each append locks the file).

Also here: how a round's standing is read from the events (``standing``, ``best_entry``) and where an entry's
per-unit test values live (``private_path``: under its ledger id, never overwritten).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..methods.registry import NO_PRESS
from .boards.boards import Board
from .results import Entry
from .scoring.events import Kind
from .scoring.gate import gate
from .scoring.ledger_fields import payload

ENTRY_ID = re.compile(r"baseline-[a-z0-9_]{1,64}|entry-[0-9]{1,12}")


def private_path(root: Path, round_: int, board: str, entry_id: str) -> Path:
    """An entry's per-unit test values, named by its ledger id (``baseline-<name>``, ``entry-<seq>``)."""
    if not ENTRY_ID.fullmatch(entry_id):
        raise ValueError(f"not an entry id: {entry_id!r}")
    return Path(root) / "private" / f"round{int(round_)}" / board / f"{entry_id}.parquet"


def save_units(units: pd.DataFrame, path: Path, exclusive: bool = False) -> None:
    """Write an entry's units; ``exclusive``: never over an existing file (an entry's id is its own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb" if exclusive else "wb") as f:
        units.to_parquet(f)


def entry_payload(board: Board, name: str, kind: str, round_: int, row: pd.Series, ok: bool, why: str,
                  excluded: list[str], author: str = "baseline") -> dict[str, Any]:
    """A scored event's payload: the terms, eligibility and the board's own rules version."""
    terms = {k: round(float(row[k]), 6) for k in ("overall", "lo", "hi", "accuracy", "memory", "memory_physical",
                                                   "speed", "overhead", "overhead_ratio")}
    if board.decode_time:
        terms["generated"] = round(float(row.get("generated", 0.0)), 6)
    return {"board": board.name, "name": name, "author": author, "kind": kind, "round": round_, **terms,
            "eligible": bool(ok), "eligibility": why, "excluded_tasks": excluded, "units": int(row.units_per_task),
            "rules_version": board.rules_version, "moved": kind == Kind.BASELINE and bool(ok)}


def read_units(root: Path, round_: int, board: str, entry_id: str) -> pd.DataFrame | None:
    """An entry's per-unit test values, None when the organiser's folder has no file for it."""
    path = private_path(root, round_, board, entry_id)
    return pd.read_parquet(path) if path.is_file() else None


def paired_record(events: list[dict], root: Path, board: str, round_: int, name: str,
                  mine: pd.DataFrame) -> list[dict[str, Any]]:
    """The new entry's paired comparison with every entry of the board and round recorded before it, from the
    private per-unit values, for its payload (``scoring.pairs``: public ranks then equal the organiser's)."""
    from .scoring.pairs import record_against

    return record_against(events, board, round_, name, mine, lambda eid: read_units(root, round_, board, eid))


def standing(events: list[dict], board: str, round_: int, kinds: tuple[str, ...] = ("baseline", "submission"),
             eligible_only: bool = True) -> pd.DataFrame:
    """The round's scored entries on ``board`` (only those that are eligible and moved it, by default)."""
    rows = [{**payload(e), "entry_id": (f"baseline-{payload(e).get('name')}" if e.get("kind") == Kind.BASELINE
                                        else f"entry-{e.get('seq')}")}
            for e in events if e.get("kind") in kinds and payload(e).get("board") == board
            and payload(e).get("round") == round_]
    table = pd.DataFrame(rows)
    if table.empty or not eligible_only:
        return table
    return table[table.eligible & table.moved.fillna(False).astype(bool)]


def best_entry(events: list[dict], board: str, round_: int) -> tuple[str, str] | None:
    """(name, entry id) of the board's current best: the highest overall among entries that moved it."""
    table = standing(events, board, round_)
    if table.empty:
        return None
    row = table.sort_values("overall", ascending=False).iloc[0]
    return str(row["name"]), str(row["entry_id"])


def best_baseline_row(events: list[dict], board: Board, round_: int) -> pd.Series:
    table = standing(events, board.name, round_, kinds=("baseline",), eligible_only=False)
    table = table[~table.name.isin([NO_PRESS, "random"])].set_index("name")
    return table.loc[table.overall.idxmax()]


def record_submission(ledger: Any, root: Path, board: Board, sub: Any, units: pd.DataFrame, round_: int,
                      rule: str, extra: dict[str, Any]) -> Entry:
    """Gate ``sub``'s per-unit test values against the board's best and record the entry and its points, all
    under the ledger's lock (module docstring); ``extra``: payload fields the caller adds (sandbox, origin...)."""
    from .scoring import score

    with ledger.lock():
        events = ledger.events()
        ledger.check_rate(sub.author, events=events)  # a concurrent submit of the same author may have used it
        scores = score.method_scores(units)
        best, best_id = best_entry(events, board.name, round_)
        best_units = pd.read_parquet(private_path(root, round_, board.name, best_id))
        mine = units[units.method == sub.name].set_index("context_id")
        theirs = best_units.set_index("context_id").reindex(mine.index)
        result = gate(mine.overall, theirs.overall, mine.task, board.gate_threshold, len(events))
        ok, why = score.eligible(scores.loc[sub.name], board, best_baseline_row(events, board, round_))
        entry = entry_payload(board, sub.name, "submission", round_, scores.loc[sub.name], ok, why,
                              units.attrs["excluded_tasks"], author=sub.author)
        entry.update(author_key=sub.author_key, code_sha256=sub.code_sha256, best_before=best, gain=result.gain,
                     gain_lo=result.lo, gain_hi=result.hi, gate_threshold=result.threshold, gate_seed=result.seed,
                     moved=bool(result.passed and ok), **extra)
        entry["paired"] = paired_record(events, root, board.name, round_, sub.name, units[units.method == sub.name])
        event = ledger.append(Kind.SUBMISSION, entry)
        entry_id = f"entry-{event['seq']}"
        save_units(units[units.method == sub.name], private_path(root, round_, board.name, entry_id), exclusive=True)
        points = award(ledger, rule, board, entry, round_, [*events, event])
    return Entry.from_payload(entry, entry_id, points)


def award(ledger: Any, rule: str, board: Board, entry: dict, round_: int, events: list[dict]) -> float:
    """Points under the arena's points rule, recorded as a ``points`` event; reviews recorded before this entry
    count (a flagged entry is no one's best)."""
    from .scoring import points

    state = points.with_flags(standing(events, board.name, round_, eligible_only=False), events)
    value = float(points.award(points.RULES[rule], state, entry, board.gate_threshold))
    ledger.append(Kind.POINTS, {"board": board.name, "name": entry["name"], "author": entry["author"],
                             "points": value, "rule": rule, "round": round_})
    return value
