"""A review into the ledger: one ``review`` event with the scores, flags and the effect on the entry's points.

The event's payload: board, name, author, round, code_sha256, judge, novelty, effectiveness, soundness, flags,
notes, and ``points_before`` / ``points_after`` (the entry's points from its ``points`` events, and 0 when
flagged). The effect itself is derived, never a second number to keep in step: ``points.flagged`` reads the
flags, the leaderboard shows the entry's points as 0 and ``points.award`` skips it. Like every event it is
hash-chained (``Ledger.append``); a review can be recorded before the entry's submission (a judge may run
first), and the flag holds once the entry arrives.
"""

from __future__ import annotations

from typing import Any

from ...util.terminal_text import safe_text
from ..scoring.events import Kind
from ..scoring.ledger import Ledger
from .bundle import Bundle
from .review import Review


def entry_points(events: list[dict], board: str, name: str) -> float:
    """The points an entry's ``points`` events sum to (before any flag)."""
    return sum(float(e["payload"].get("points", 0.0)) for e in events
               if e.get("kind") == Kind.POINTS and e["payload"].get("board") == board
               and e["payload"].get("name") == name)


def record_review(ledger: Ledger, review: Review, bundle: Bundle, board: str, round_: int = 1,
                  now: Any = None) -> dict:
    """Append ``review`` of ``bundle``'s entry on ``board`` to ``ledger``; returns the event as written."""
    review.checked()
    before = entry_points(ledger.events(), board, bundle.name)
    payload = {"board": board, "name": safe_text(bundle.name, 64), "author": safe_text(bundle.author),
               "round": round_,
               "code_sha256": bundle.code_sha256, "judge": review.judge, "novelty": review.novelty,
               "effectiveness": review.effectiveness, "soundness": review.soundness, "flags": list(review.flags),
               "notes": list(review.notes), "points_before": round(before, 6),
               "points_after": 0.0 if review.flags else round(before, 6)}
    return ledger.append(Kind.REVIEW, payload, now=now)
