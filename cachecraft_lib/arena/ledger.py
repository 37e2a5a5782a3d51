"""The arena's ledger: append-only JSON lines, each event hash-chained to the one before it.

Every event is ``{"seq", "time", "kind", "rules_version", "payload", "prev", "hash"}`` where ``hash`` is the
SHA-256 of the event's canonical JSON without ``hash`` and ``prev`` is the previous event's hash (``GENESIS``
for the first). Editing a line breaks its hash, deleting or reordering lines breaks ``seq``/``prev``:
``events()`` raises ``LedgerTampered`` naming the first bad line. Cutting lines off the end leaves a valid
chain, so each append also writes the head (count and last hash) beside the ledger (``<path>.head``); publish
that head (e.g. in the leaderboard) to make truncation detectable by anyone. Leaderboards are derived from
the events, never stored separately. A ``review`` event (``judges.record``) carries a judge's scores and
flags for an entry and the effect on its points; the points rules read flags from there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

GENESIS = "0" * 64
KINDS = ("round", "baseline", "submission", "rejection", "points", "review")
# arena-2: ``review`` events (a judge's scores and flags); a flagged entry's points are zero (points.py)
RULES_VERSION = "arena-2"
RATE_LIMIT, RATE_WINDOW = 5, timedelta(hours=24)  # the post: 5 official submissions per author per 24 hours
COUNTED = ("submission", "rejection")


class LedgerTampered(RuntimeError):
    """The chain does not verify: ``line`` is the first bad line (1-based)."""

    def __init__(self, path: Path, line: int, why: str) -> None:
        self.line = line
        super().__init__(f"{path}: line {line} {why}; the ledger was edited, reordered or cut (restore it from a copy)")


class RateLimited(RuntimeError):
    """The author used up the submissions allowed in the window; the message says when the next one opens."""


def _digest(event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _as_time(now: datetime | str | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if isinstance(now, str):
        now = datetime.fromisoformat(now)
    return now if now.tzinfo else now.replace(tzinfo=UTC)


class Ledger:
    """One arena's ledger file (created on the first append)."""

    def __init__(self, path: str | Path, rules_version: str = RULES_VERSION) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_name(self.path.name + ".head")
        self.rules_version = rules_version

    def append(self, kind: str, payload: dict, now: datetime | str | None = None) -> dict:
        """Add one event after verifying the chain so far; returns the event as written."""
        if kind not in KINDS:
            raise ValueError(f"unknown ledger event kind {kind!r}; kinds: {', '.join(KINDS)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # two processes appending at once still form one chain
            events = self._verified()
            event = {"seq": len(events), "time": _as_time(now).isoformat(), "kind": kind,
                     "rules_version": str(payload.get("rules_version", self.rules_version)),
                     "payload": json.loads(json.dumps(payload, default=_plain)),
                     "prev": events[-1]["hash"] if events else GENESIS}
            event["hash"] = _digest(event)
            f.write(json.dumps(event, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
            self.head_path.write_text(json.dumps({"events": len(events) + 1, "hash": event["hash"]}) + "\n")
        return event

    def events(self) -> list[dict]:
        """Every event, in order, after verifying the chain (``LedgerTampered`` otherwise)."""
        return self._verified()

    def head(self) -> dict:
        """The chain's head to publish: number of events and the last hash."""
        events = self._verified()
        return {"events": len(events), "hash": events[-1]["hash"] if events else GENESIS}

    def _verified(self) -> list[dict]:
        if not self.path.exists():
            return []
        events, prev = [], GENESIS
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                raise LedgerTampered(self.path, number, "is not valid JSON") from None
            if not isinstance(event, dict) or event.get("hash") != _digest(event):
                raise LedgerTampered(self.path, number, "does not match its hash (edited)")
            if event.get("seq") != number - 1 or event.get("prev") != prev:
                raise LedgerTampered(self.path, number, "does not follow the line before it (deleted or reordered)")
            events.append(event)
            prev = event["hash"]
        self._check_head(events)
        return events

    def _check_head(self, events: list[dict]) -> None:
        if not self.head_path.exists():
            return
        head = json.loads(self.head_path.read_text())
        if head["events"] > len(events) or (head["events"] == len(events) and events
                                            and head["hash"] != events[-1]["hash"]):
            raise LedgerTampered(self.path, len(events) + 1, f"is missing: the head records {head['events']} events")

    def check_rate(self, author: str, limit: int = RATE_LIMIT, now: datetime | str | None = None,
                   window: timedelta = RATE_WINDOW) -> None:
        """``RateLimited`` when ``author`` already has ``limit`` submissions (or rejections) in the last ``window``."""
        now_t = _as_time(now)
        times = sorted(_as_time(e["time"]) for e in self.events() if e["kind"] in COUNTED
                       and e["payload"].get("author") == author and now_t - _as_time(e["time"]) < window)
        if len(times) >= limit:
            opens = times[len(times) - limit] + window
            raise RateLimited(f"{author} made {len(times)} submissions in the last {window}; the limit is {limit}. "
                              f"The next one is allowed after {opens.isoformat(timespec='minutes')} "
                              "(use `cachecraft arena dev` meanwhile: unlimited)")


def _plain(value: Any) -> Any:
    """numpy scalars and paths in a payload, as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
