"""Paired comparisons recorded in the ledger, so anyone ranks a board as the organiser does.

Why: a rank range needs the interval of each pair's difference, and a paired interval needs the per-unit test
values, which stay in the organiser's ``private/`` folder. Without them a third party rebuilding the site from
the public ledger could only compare overall intervals, which overlap far more often (notebook 08's B_offline
round: four entries "1-4" publicly, though search-v1-0 minus FRC is +0.093 [+0.059, +0.129] paired). So when
the organiser records an entry (``baseline`` or ``submission``) it also records, in the same signed payload
under ``paired``, the entry's paired difference with every entry of the board and round already recorded (the
latest of each other name, eligible or not): ``{"vs": <entry id>, "name", "diff", "lo", "hi", "per_task"}``
(``per_task``: the fewest common units in a task). The leaderboard ranks a pair by that record wherever one of
the two entries holds it, else by the per-unit files when given, else by the overlap of the two overall
intervals (an older ledger; the site says so).

One function computes the interval for the record and for the organiser's own recomputation (``pair_interval``),
so both read the same bootstrap over the same common units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from ...stats.intervals import Interval
from .events import SCORED, Event, typed

FIELD = "paired"


def entry_id(event: dict) -> str | None:
    """A scored event's ledger id, as its per-unit file is named: ``baseline-<name>`` or ``entry-<seq>``."""
    return Event.parse(event).entry_id


def pair_interval(mine: pd.DataFrame, theirs: pd.DataFrame) -> Interval | None:
    """``overall(mine) - overall(theirs)`` over the test units both hold (``context_id``), with its paired 95%
    interval (``score.paired_gain``); None when they share no unit."""
    from .score import paired_gain

    both = pd.concat([mine.assign(method="a"), theirs.assign(method="b")], ignore_index=True)
    common = both.groupby("context_id").method.nunique() == 2
    both = both[both.context_id.isin(common[common].index)]
    return paired_gain(both, "a", "b") if len(both) else None


def latest_entries(events: Iterable[dict], board: str, round_: int) -> dict[str, str]:
    """name -> ledger id of the latest scored entry of each name on ``board`` in ``round_``."""
    return {str(e.name): e.entry_id for e in typed(events, *SCORED)
            if e.board == board and e.round == round_ and e.entry_id is not None}


def comparisons(mine: pd.DataFrame, others: Mapping[str, tuple[str, pd.DataFrame | None]]) -> list[dict[str, Any]]:
    """The ``paired`` record of an entry with per-unit values ``mine`` against ``others`` (entry id -> (name, its
    per-unit values)); an entry without values or without a common unit is left out."""
    rows = []
    for vs, (name, theirs) in others.items():
        found = pair_interval(mine, theirs) if theirs is not None and len(theirs) else None
        if found is not None:
            rows.append({"vs": vs, "name": name, "diff": found.point, "lo": _finite(found.lo),
                         "hi": _finite(found.hi), "per_task": int(found.n)})
    return rows


def record_against(events: Iterable[dict], board: str, round_: int, name: str, mine: pd.DataFrame,
                   units_of: Callable[[str], pd.DataFrame | None]) -> list[dict[str, Any]]:
    """The ``paired`` record of a new entry ``name``: against the latest entry of every other name on the board
    and round (``units_of(entry id)``: its per-unit values, None when absent)."""
    others = {eid: (other, units_of(eid)) for other, eid in latest_entries(events, board, round_).items()
              if other != name}
    return comparisons(mine, others)


def _finite(value: float) -> float | None:
    """An interval end as JSON holds it: None where there is none (one unit per task)."""
    return None if math.isnan(value) else float(value)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


Key = tuple[Any, str]  # (round, entry id): a baseline's id is the same in every round


def recorded(events: Iterable[dict]) -> dict[tuple[Key, Key], Interval]:
    """((round, id a), (round, id b)) -> the interval of a - b, from every scored event's ``paired`` record, in
    both directions (b - a is the same draws negated). A malformed record is skipped (the ledger is public)."""
    found: dict[tuple[Key, Key], Interval] = {}
    for event in typed(events, *SCORED):
        rows = event.payload.get(FIELD)
        if event.entry_id is None or not isinstance(rows, list):
            continue
        round_ = event.round
        mine = (round_, event.entry_id)
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("vs"), str):
                continue
            diff, lo, hi = (_number(row.get(k)) for k in ("diff", "lo", "hi"))
            if math.isnan(diff):
                continue
            per_task = _number(row.get("per_task"))
            units = 0 if math.isnan(per_task) else int(per_task)
            theirs = (round_, row["vs"])
            found[(mine, theirs)] = Interval(diff, lo, hi, units)
            found[(theirs, mine)] = Interval(-diff, -hi, -lo, units)
    return found
