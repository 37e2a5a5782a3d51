"""The ledger's event kinds as one enum, and a typed, read-only view of an event.

Why: the kinds were strings compared in some thirty places ("submission", "test_look"...), where a typo reads
as "no such event" and nothing fails. ``Kind`` names each once (a misspelt member is an AttributeError); it is a
``StrEnum``, so the JSON on disk is the same string as before, old ledgers verify unchanged, and a kind read
from a line compares equal to its member. ``Event`` is one line of the ledger as a frozen dataclass, parsed
leniently (the ledger is public input: an unknown kind or an odd payload is kept, never a crash);
``of_kind``/``typed`` filter a read ledger by kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """Every kind of ledger event (``Ledger.append(kind, payload)``: the one way in; a new kind is added here)."""

    INIT = "init"
    ROUND = "round"
    BASELINE = "baseline"
    SUBMISSION = "submission"
    REJECTION = "rejection"
    POINTS = "points"
    REVIEW = "review"
    TEST_LOOK = "test_look"
    PLAN = "plan"


DOCS: dict[Kind, str] = {
    Kind.INIT: "the arena created (`arena init`): profile, rules version, the organiser key's fingerprint",
    Kind.ROUND: "a round's salted commitment to its secret, and how the secret was made (scoring.rounds)",
    Kind.BASELINE: "a baseline scored on a round's test items (arena.record_baselines)",
    Kind.SUBMISSION: "an entry scored on the test items and gated against the board's best (arena.submit)",
    Kind.REJECTION: "a refused submission: kind, author, a public message (scoring.refusals)",
    Kind.POINTS: "points awarded to an entry under a points rule (scoring.points)",
    Kind.REVIEW: "a judge's scores and flags of an entry (judges.record)",
    Kind.TEST_LOOK: "one evaluation of one program on a round's test items: author, program hash, board, round, "
                    "and for a search's entry its plan, run and random seed (recorded before it runs, whether it "
                    "is then scored, refused or crashes)",
    Kind.PLAN: "a search's pre-registered plan, recorded before any child is evaluated (search/preregister.py)",
}
SCORED = (Kind.BASELINE, Kind.SUBMISSION)  # events that put an entry on a board
COUNTED = (Kind.SUBMISSION, Kind.REJECTION)  # events that count toward an author's rate limit


def kind_of(raw: object) -> Kind | None:
    """The kind of a ledger line as read, None for a kind this version does not know (or no dict at all)."""
    value = raw.get("kind") if isinstance(raw, Mapping) else None
    try:
        return Kind(value) if isinstance(value, str) else None
    except ValueError:
        return None


def of_kind(events: Iterable[dict], *kinds: Kind) -> list[dict]:
    """The events (as read, dicts) of any of ``kinds``, in ledger order."""
    return [e for e in events if kind_of(e) in kinds]


@dataclass(frozen=True)
class Event:
    """One ledger line, typed: what the code reads of it. ``raw`` is the line as on disk (hashed and signed)."""

    seq: int | None
    kind: Kind | None
    payload: Mapping[str, Any]
    time: str | None = None
    hash: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: object) -> Event:
        """A line as read (never raises: a malformed payload reads as {}, an odd seq as None)."""
        if not isinstance(raw, Mapping):
            return cls(None, None, {})
        data, seq = raw.get("payload", raw), raw.get("seq")
        return cls(seq if isinstance(seq, int) and not isinstance(seq, bool) else None, kind_of(raw),
                   data if isinstance(data, Mapping) else {}, raw.get("time"), raw.get("hash"), raw)

    @property
    def board(self) -> Any:
        return self.payload.get("board")

    @property
    def name(self) -> Any:
        return self.payload.get("name")

    @property
    def round(self) -> Any:
        return self.payload.get("round", 1)

    @property
    def entry_id(self) -> str | None:
        """A scored event's ledger id, as its per-unit file is named: ``baseline-<name>`` or ``entry-<seq>``."""
        if self.kind is Kind.BASELINE:
            return f"baseline-{self.name}"
        if self.kind is Kind.SUBMISSION and self.seq is not None:
            return f"entry-{self.seq}"
        return None


def typed(events: Iterable[Mapping[str, Any]], *kinds: Kind) -> list[Event]:
    """The events as ``Event``s, only those of ``kinds`` when given."""
    parsed = [Event.parse(e) for e in events]
    return [e for e in parsed if not kinds or e.kind in kinds]
