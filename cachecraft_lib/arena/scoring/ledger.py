"""The arena's ledger: append-only JSON lines, hash-chained and signed with the organiser's Ed25519 key.

Every event is ``{"seq", "time", "kind", "rules_version", "payload", "prev", "hash", "sig"}``: ``hash`` is the
SHA-256 of the event's canonical JSON without ``hash`` and ``sig``, ``prev`` the previous event's hash
(``GENESIS`` first) and ``sig`` the organiser's Ed25519 signature of ``hash`` (``signing``: private key in
``<arena>/private/``, public key in ``<arena>/ledger.pub``). Editing a line breaks its hash, deleting or
reordering lines breaks ``seq``/``prev``, recomputing the chain after an edit needs the private key to sign
it: ``events()`` raises ``LedgerTampered`` naming the first bad line. Stripping the signatures and deleting
``ledger.pub`` is no way round it: every event declares the arena's rules version (``RULES_VERSION``; a board's
own version stays in the payload), and one that declares a signed version (``arena-3`` on) without a signature
to check is a downgrade, refused as tampered; only a ledger from before signing reads unsigned (and
``leaderboard`` and ``site`` refuse it: ``verify.trusted_events``). Cutting lines off the end leaves a valid
chain, so each append also writes the signed head (count, last hash, public key) beside the ledger
(``<path>.head``) and ``publish_head`` writes it next to a published leaderboard (``ledger_head.json``):
``verify(head=...)`` against a published head detects truncation, a re-chained ledger and a swapped key.
Leaderboards are derived from the events, never stored separately. A ``review`` event (``judges.record``)
carries a judge's scores and flags; the points rules read flags from there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from . import signing
from .events import COUNTED, DOCS, Kind, of_kind
from .verify import LedgerTampered, verify_ledger

GENESIS = "0" * 64
KIND_DOCS = DOCS  # the event kinds (``events.Kind``) and what each records
KINDS = tuple(KIND_DOCS)
# arena-3: events signed (Ed25519), salted round commitments, reserved names, normalised authors;
# arena-4: every event declares the arena's rules version (a board's own version stays in the payload), so a
# ledger whose signatures were stripped declares a signed version on every line
RULES_VERSION = "arena-4"
SIGNED_SINCE = 3  # events of rules version arena-3 and later are signed: unsigned, they were stripped
RATE_LIMIT, RATE_WINDOW = 5, timedelta(hours=24)  # the reference arena: 5 official submissions per author per 24 hours
HEAD_FILE = "ledger_head.json"


class RateLimited(RuntimeError):
    """The author used up the submissions allowed in the window; the message says when the next one opens."""


def _digest(event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k not in ("hash", "sig")}
    return hashlib.sha256(signing.canonical(body)).hexdigest()


def _as_time(now: datetime | str | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    if isinstance(now, str):
        now = datetime.fromisoformat(now)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class _Prefix:
    """Lines already verified: the file's first ``size`` bytes (SHA-256 ``digest``) under key ``public``."""

    size: int
    digest: str
    public: str | None
    events: tuple[dict, ...]


class Ledger:
    """One arena's ledger file (created, with the organiser's key pair, on the first append).

    Reading verifies only what is new: the verified prefix is kept (``_Prefix``, keyed by its byte size and
    SHA-256, and the key it was checked under), and a read whose file starts with exactly those bytes checks
    the lines after them alone; any other file is verified from its first line. The events returned are shared
    with that cache: read them, never modify them."""

    def __init__(self, path: str | Path, rules_version: str = RULES_VERSION,
                 private_key: str | Path | None = None) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_name(self.path.name + ".head")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.public_path = self.path.with_name(signing.PUBLIC_NAME)
        self.key_path = Path(private_key) if private_key else self.path.parent / "private" / signing.PRIVATE_NAME
        self.rules_version = rules_version
        self._prefix: _Prefix | None = None
        self._lock_depth = 0

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the arena's lock (``fcntl.flock`` on ``<ledger>.lock``) for a read-decide-append sequence: a
        second process (a second ``arena submit``) waits until it is released, so it decides on what this one
        appended. Re-entrant within this object; appends take their own lock on the ledger file as well."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0

    # ------------------------------------------------------------------------------------ writing
    def append(self, kind: Kind | str, payload: dict, now: datetime | str | None = None) -> dict:
        """Add one signed event after verifying the chain so far; returns the event as written (its ``kind``
        the plain string on disk, as every reader of old ledgers expects)."""
        if kind not in KINDS:
            raise ValueError(f"unknown ledger event kind {kind!r}; kinds: {', '.join(KINDS)}")
        kind = str(Kind(kind))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # two processes appending at once still form one chain
            events = self._verified()
            key = self._signing_key(first=not events)
            when = _as_time(now)
            if events and when < _as_time(events[-1]["time"]):  # a signed event may not be backdated
                raise ValueError(f"a {kind} event dated {when.isoformat()} would come before the ledger's last event "
                                 f"({events[-1]['time']}): events are appended in time order")
            event = {"seq": len(events), "time": when.isoformat(), "kind": kind,
                     "rules_version": self.rules_version,  # the arena's, never the board's (payload)
                     "payload": json.loads(json.dumps(payload, default=_plain)),
                     "prev": events[-1]["hash"] if events else GENESIS}
            event["hash"] = _digest(event)
            event["sig"] = signing.sign(key, event["hash"].encode())
            f.write(json.dumps(event, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
            self.head_path.write_text(json.dumps(self._signed_head(key, len(events) + 1, event["hash"])) + "\n")
        return event

    def _signing_key(self, first: bool):
        """The organiser's key; created with the first event (with ``ledger.pub``), required afterwards."""
        if first and not self.public_path.exists() and not self.key_path.exists():
            key = signing.create_private(self.key_path)
            self.public_path.write_text(signing.public_hex(key) + "\n")
            return key
        if not self.public_path.exists():
            raise signing.KeyMissing(f"{self.path} has events but no {self.public_path.name}: it predates signed "
                                     "ledgers (arena-3) or lost its key; start a new arena folder (--root)")
        key = signing.load_private(self.key_path)
        if not signing.same_key(signing.public_hex(key), self.public_key()):
            raise signing.KeyMissing(f"{self.key_path} does not match {self.public_path}: not this ledger's key")
        return key

    def _signed_head(self, key, events: int, last_hash: str) -> dict:
        body = signing.head_body(events, last_hash, signing.public_hex(key))
        return {**body, "signature": signing.sign(key, signing.canonical(body))}

    def publish_head(self, folder: str | Path) -> Path:
        """Write the signed head into ``folder`` (``ledger_head.json``), to publish with the leaderboard."""
        events = self._verified()
        key = self._signing_key(first=False)
        path = Path(folder) / HEAD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        head = self._signed_head(key, len(events), events[-1]["hash"] if events else GENESIS)
        path.write_text(json.dumps(head, indent=1) + "\n")
        return path

    # ------------------------------------------------------------------------------------ reading
    def public_key(self) -> str | None:
        """The ledger's public key (hex) from ``ledger.pub``; None for an unsigned (pre arena-3) ledger."""
        return self.public_path.read_text().strip() if self.public_path.exists() else None

    def events(self, *kinds: Kind) -> list[dict]:
        """Every event, in order, after verifying the chain and the signatures (``LedgerTampered`` otherwise);
        only those of ``kinds`` when given (``events.Kind``; ``events.typed`` reads them as ``Event``s)."""
        events = self._verified()
        return of_kind(events, *kinds) if kinds else events

    def head(self) -> dict:
        """The chain's head to publish: number of events and the last hash."""
        events = self._verified()
        return {"events": len(events), "hash": events[-1]["hash"] if events else GENESIS}

    def verify(self, head: dict | str | Path | None = None, public_key: str | None = None):
        """The ledger's status for a third party: a ``verify.Verification`` (never raises on a bad ledger)."""
        return verify_ledger(self, head, public_key)

    def _verified(self, public: str | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        public = public or self.public_key()
        data = self.path.read_bytes()
        events, prev, start = self._known_prefix(data, public)
        for number, line in enumerate(data[start:].decode("utf-8").splitlines(), start=len(events) + 1):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                raise LedgerTampered(self.path, number, "is not valid JSON") from None
            if not isinstance(event, dict) or event.get("hash") != _digest(event):
                raise LedgerTampered(self.path, number, "does not match its hash (edited)")
            if event.get("seq") != number - 1 or event.get("prev") != prev:
                raise LedgerTampered(self.path, number, "does not follow the line before it (deleted or reordered)")
            if public is None and "sig" in event:
                raise LedgerTampered(self.path, number, f"is signed but {self.public_path.name} is missing")
            if public is None and _declares_signed(event):
                raise LedgerTampered(self.path, number, f"declares rules version {event.get('rules_version')} "
                                     f"(signed events) but {self.public_path.name} is missing: a downgrade")
            if public is not None and not signing.valid(public, event["hash"].encode(), str(event.get("sig", ""))):
                raise LedgerTampered(self.path, number, "is not signed by the organiser's key (ledger.pub)")
            events.append(event)
            prev = event["hash"]
        self._check_head(events)
        if data.endswith(b"\n"):  # whole lines only: a line being written is read again next time
            self._prefix = _Prefix(len(data), hashlib.sha256(data).hexdigest(), public, tuple(events))
        return events

    def _known_prefix(self, data: bytes, public: str | None) -> tuple[list[dict], str, int]:
        """(events, last hash, byte offset) of the verified prefix when ``data`` starts with it, else nothing."""
        known = self._prefix
        if known is None or known.public != public or len(data) < known.size \
                or hashlib.sha256(data[: known.size]).hexdigest() != known.digest:
            return [], GENESIS, 0
        return list(known.events), known.events[-1]["hash"] if known.events else GENESIS, known.size

    def _check_head(self, events: list[dict]) -> None:
        if not self.head_path.exists():
            return
        try:
            head = json.loads(self.head_path.read_text())
            count, last = int(head["events"]), str(head["hash"])
        except (ValueError, KeyError, TypeError):
            raise LedgerTampered(self.path, len(events) + 1, f"cannot be checked: {self.head_path} is malformed") \
                from None
        if count > len(events) or (count == len(events) and events and last != events[-1]["hash"]):
            raise LedgerTampered(self.path, len(events) + 1, f"is missing: the head records {count} events")

    def _recent(self, author: str, now: datetime | str | None, window: timedelta,
                events: list[dict] | None = None) -> list[datetime]:
        """When ``author`` (normalised: ``submission.author_key``) made each counted event in the last ``window``."""
        from ..submissions.identity import author_key

        me, now_t = author_key(author), _as_time(now)
        events = self.events() if events is None else events
        return sorted(_as_time(e["time"]) for e in of_kind(events, *COUNTED)
                      if author_key(str(e["payload"].get("author_key") or e["payload"].get("author", ""))) == me
                      and now_t - _as_time(e["time"]) < window)

    def quota(self, author: str, limit: int = RATE_LIMIT, now: datetime | str | None = None,
              window: timedelta = RATE_WINDOW, events: list[dict] | None = None) -> int:
        """How many more submissions ``author`` may make now (what ``check_rate`` would let through)."""
        return max(0, limit - len(self._recent(author, now, window, events)))

    def check_rate(self, author: str, limit: int = RATE_LIMIT, now: datetime | str | None = None,
                   window: timedelta = RATE_WINDOW, events: list[dict] | None = None) -> None:
        """``RateLimited`` when ``author`` (normalised: ``submission.author_key``) already has ``limit``
        submissions or rejections (refusals, crashes, failed checks) in the last ``window`` (``events``: the
        ledger's events already read, to read it once)."""
        times = self._recent(author, now, window, events)
        if len(times) >= limit:
            opens = times[len(times) - limit] + window
            raise RateLimited(f"{author} made {len(times)} submissions in the last {window}; the limit is {limit}. "
                              f"The next one is allowed after {opens.isoformat(timespec='minutes')} "
                              "(use `cachecraft arena dev` meanwhile: unlimited)")


def _declares_signed(event: dict) -> bool:
    """The event's rules version is ``arena-N`` with N >= ``SIGNED_SINCE``: it was written signed."""
    version = str(event.get("rules_version", ""))
    number = version.removeprefix("arena-")
    return version.startswith("arena-") and number.isdigit() and int(number) >= SIGNED_SINCE


def _plain(value: Any) -> Any:
    """numpy scalars and paths in a payload, as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
