"""``Ledger.verify``: can a third party trust this ledger? One status, never an exception.

Trust comes from outside the arena folder: a head published with a leaderboard (``ledger_head.json``, signed)
or the organiser's public key published elsewhere. Against it the check finds

- ``tampered``: a line edited, reordered or deleted inside, or not signed by the key (``line`` says which), or
  signatures stripped and ``ledger.pub`` deleted from events that declare a signed rules version (``arena-3``
  on: a downgrade);
- ``wrong_key``: the folder's ``ledger.pub`` is not the trusted key (someone re-signed a rewritten ledger);
- ``truncated``: fewer events than the published head counts (lines cut off the end, head file removed);
- ``forked``: the event at the head's position is not the one published (history rewritten);
- ``bad_head``: the published head is malformed or its signature does not verify;
- ``unsigned``: a ledger from before signed events (no event declares arena-3 or later): its chain holds, but
  anyone could recompute it, so it is not verified (only ``ok`` is);
- ``ok``: chain and signatures verify (``head_checked`` says whether a published head was checked too; without
  one, truncation and a swapped key cannot be detected).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import signing

STATUSES = ("ok", "unsigned", "tampered", "wrong_key", "truncated", "forked", "bad_head")


@dataclass(frozen=True)
class Verification:
    """The outcome of ``verify_ledger``: ``ok`` only when ``status == "ok"``."""

    status: str
    message: str
    events: int = 0
    line: int | None = None
    public_key: str | None = None
    head_checked: bool = False
    head_events: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def fingerprint(self) -> str | None:
        return signing.fingerprint(self.public_key) if self.public_key else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "fingerprint": self.fingerprint}


class LedgerTampered(RuntimeError):
    """The chain does not verify: ``line`` is the first bad line (1-based)."""

    def __init__(self, path: Path, line: int, why: str) -> None:
        self.line = line
        super().__init__(f"{path}: line {line} {why}; the ledger was edited, reordered, cut or re-signed "
                         "(restore it from a copy)")


def read_head(head: dict | str | Path) -> dict:
    """A published head from a dict or a JSON file."""
    return dict(head) if isinstance(head, dict) else json.loads(Path(head).read_text())


def _head_problem(head: dict, trusted: str) -> str | None:
    body_keys = ("ledger", "events", "hash", "public_key")
    if not all(k in head for k in (*body_keys, "signature")):
        return f"the head lacks {[k for k in (*body_keys, 'signature') if k not in head]}"
    body = signing.head_body(head["events"], head["hash"], head["public_key"])
    if not signing.same_key(str(head["public_key"]), trusted):
        return "the head names another public key than the trusted one"
    if not signing.valid(trusted, signing.canonical(body), str(head["signature"])):
        return "the head's signature does not verify under its public key"
    return None


def verify_ledger(ledger: Any, head: dict | str | Path | None = None, public_key: str | None = None) -> Verification:
    """Check ``ledger`` (a ``Ledger``) against a published ``head`` and/or a trusted ``public_key`` (hex)."""
    try:
        published = read_head(head) if head is not None else None
    except (OSError, ValueError) as err:
        return Verification("bad_head", f"cannot read the published head ({err})")
    folder_key = ledger.public_key()
    trusted = public_key or (str(published.get("public_key", "")) if published else None) or folder_key
    if published is not None:
        problem = _head_problem(published, trusted or "")
        if problem:
            return Verification("bad_head", problem, public_key=trusted, head_checked=True)
    if folder_key is not None and trusted and not signing.same_key(folder_key, trusted):
        return Verification("wrong_key", f"{ledger.public_path} holds key {signing.fingerprint(folder_key)}, the "
                            f"trusted key is {signing.fingerprint(trusted)}: the ledger was re-signed by someone "
                            "else", public_key=trusted, head_checked=published is not None)
    try:
        events = ledger._verified(public=trusted)
    except LedgerTampered as err:
        return Verification("tampered", str(err), line=err.line, public_key=trusted,
                            head_checked=published is not None)
    n = len(events)
    if published is not None:
        want = int(published["events"])
        if want > n:
            return Verification("truncated", f"the published head counts {want} events, the ledger has {n}",
                                n, n + 1, trusted, True, want)
        if want and events[want - 1]["hash"] != published["hash"]:
            return Verification("forked", f"event {want} is not the one the head published (history rewritten)",
                                n, want, trusted, True, want)
    if trusted is None:
        return Verification("unsigned", f"{n} events chain, but unsigned (a pre arena-3 ledger): anyone could "
                            "recompute it", n)
    note = "" if published is not None else " (no published head given: truncation is not checked)"
    return Verification("ok", f"{n} events, chain and signatures verify{note}", n, None, trusted,
                        published is not None, int(published["events"]) if published else None)
