"""``Ledger.verify``: can a third party trust this ledger? One status, never an exception.

Trust comes only from outside the arena folder: the organiser's public key (or its fingerprint, printed by
``cachecraft arena init``) passed with ``--public-key``, or a head published with a leaderboard
(``ledger_head.json``, signed). Whoever can write the arena folder can also replace ``ledger.pub``, so a ledger
checked only against its own folder's key is never called verified. Against a pin the check finds

- ``tampered``: a line edited, reordered or deleted inside, or not signed by the key (``line`` says which), or
  signatures stripped and ``ledger.pub`` deleted from events that declare a signed rules version (``arena-3``
  on: a downgrade; every event declares the arena's rules version, so a stripped event always shows);
- ``wrong_key``: the folder's ``ledger.pub`` is not the pinned key (someone re-signed a rewritten ledger), or a
  fingerprint given does not match it;
- ``truncated``: fewer events than the published head counts (lines cut off the end, head file removed);
- ``forked``: the event at the head's position is not the one published (history rewritten);
- ``bad_head``: the published head is malformed, names another key than the pinned one, or its signature does
  not verify;
- ``unsigned``: a ledger from before signed events (no event declares arena-3 or later): its chain holds, but
  anyone could recompute it; ``leaderboard`` and ``site`` refuse it (``trusted_events``);
- ``unpinned``: chain and signatures verify under the folder's own ``ledger.pub``, but no key was pinned:
  "signed, key not pinned" (a swapped key would pass; not ``ok``);
- ``ok``: verified against the pinned key (``head_checked`` says whether a published head was checked too;
  without one, truncation cannot be detected).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import signing

STATUSES = ("ok", "unpinned", "unsigned", "tampered", "wrong_key", "truncated", "forked", "bad_head")
SHOWN = {"ok": "verified", "unpinned": "signed, key not pinned"}  # the words a status is shown with
MIN_FINGERPRINT = 16  # hex characters of a pinned fingerprint: 64 bits of SHA-256 (a second preimage is 2**64)


@dataclass(frozen=True)
class Verification:
    """The outcome of ``verify_ledger``: ``ok`` only when ``status == "ok"`` (verified against a pinned key)."""

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
    def signed(self) -> bool:
        """Chain and signatures hold (pinned or not): the events may be shown, with ``shown`` beside them."""
        return self.status in ("ok", "unpinned")

    @property
    def shown(self) -> str:
        """The status in words: "verified", "signed, key not pinned", else the status itself."""
        return SHOWN.get(self.status, self.status)

    @property
    def fingerprint(self) -> str | None:
        return signing.fingerprint(self.public_key) if self.public_key else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "shown": self.shown, "fingerprint": self.fingerprint}


class LedgerTampered(RuntimeError):
    """The chain does not verify: ``line`` is the first bad line (1-based)."""

    def __init__(self, path: Path, line: int, why: str) -> None:
        self.line = line
        super().__init__(f"{path}: line {line} {why}; the ledger was edited, reordered, cut or re-signed "
                         "(restore it from a copy)")


class LedgerUntrusted(RuntimeError):
    """The ledger cannot be shown as a board: unsigned, downgraded, tampered or not the pinned key's."""


def read_head(head: dict | str | Path) -> dict:
    """A published head from a dict or a JSON file."""
    return dict(head) if isinstance(head, dict) else json.loads(Path(head).read_text())


def read_pin(value: str | Path | None) -> str | None:
    """``--public-key``'s value as a pin: a file holding the key, the key (64 hex) or a fingerprint (16 to 64 hex
    of the key's SHA-256); ``ValueError`` saying what was expected otherwise."""
    if value is None:
        return None
    text = str(value).strip()
    if not re.fullmatch(r"[0-9a-fA-F]{16,64}", text):
        path = Path(text).expanduser()
        if not path.is_file():
            raise ValueError("--public-key takes the organiser's public key (64 hex characters), its fingerprint "
                             f"(at least {MIN_FINGERPRINT} hex characters, printed by `arena init`) or a file "
                             "holding the key")
        text = path.read_text().strip()
        if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
            raise ValueError("the --public-key file does not hold a public key (64 hex characters)")
    return text.lower()


def resolve_pin(pin: str | None, folder_key: str | None) -> str | None:
    """The pinned key in full: a key is itself; a fingerprint names the folder's key when it matches, else it is
    returned as is (and fails as ``wrong_key``)."""
    if pin is None or len(pin) == 64:
        return pin
    if folder_key and signing.fingerprint(folder_key, len(pin)) == pin:
        return folder_key
    return pin


def _head_problem(head: dict, trusted: str) -> str | None:
    body_keys = ("ledger", "events", "hash", "public_key")
    if not all(k in head for k in (*body_keys, "signature")):
        return f"the head lacks {[k for k in (*body_keys, 'signature') if k not in head]}"
    body = signing.head_body(head["events"], head["hash"], head["public_key"])
    if not signing.same_key(str(head["public_key"]), trusted):
        return "the head names another public key than the pinned one"
    if not signing.valid(trusted, signing.canonical(body), str(head["signature"])):
        return "the head's signature does not verify under its public key"
    return None


def verify_ledger(ledger: Any, head: dict | str | Path | None = None, public_key: str | None = None) -> Verification:
    """Check ``ledger`` (a ``Ledger``) against a published ``head`` and/or a pinned ``public_key`` (key or
    fingerprint, hex); with neither, the folder's own key is all there is: ``unpinned`` at best."""
    try:
        published = read_head(head) if head is not None else None
    except (OSError, ValueError) as err:
        return Verification("bad_head", f"cannot read the published head ({err})")
    folder_key = ledger.public_key()
    pin = resolve_pin(public_key, folder_key) or (str(published.get("public_key", "")) if published else None)
    trusted = pin or folder_key
    checked = published is not None
    if published is not None:
        problem = _head_problem(published, trusted or "")
        if problem:
            return Verification("bad_head", problem, public_key=trusted, head_checked=True)
    if pin is not None and (folder_key is None or not signing.same_key(folder_key, pin)):
        held = signing.fingerprint(folder_key) if folder_key else "none"
        return Verification("wrong_key", f"{ledger.public_path.name} holds key {held}, the pinned key is "
                            f"{pin[:16]}: the ledger was re-signed by someone else, or this is another arena",
                            public_key=pin, head_checked=checked)
    try:
        events = ledger._verified(public=trusted)
    except LedgerTampered as err:
        return Verification("tampered", str(err), line=err.line, public_key=trusted, head_checked=checked)
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
    if pin is None:
        return Verification("unpinned", f"{n} events, chain and signatures verify under the folder's own "
                            f"{ledger.public_path.name} (key {signing.fingerprint(trusted)}), which whoever writes "
                            "the folder could replace: pass --public-key (the fingerprint `arena init` printed) or "
                            "--head to verify", n, None, trusted)
    note = "" if checked else " (no published head given: truncation is not checked)"
    return Verification("ok", f"{n} events, chain and signatures verify under the pinned key{note}", n, None,
                        trusted, checked, int(published["events"]) if published else None)


def trusted_events(ledger: Any, head: dict | str | Path | None = None,
                   public_key: str | None = None) -> tuple[list[dict], Verification]:
    """The events to show as a board, with their verification (``ok`` or ``unpinned``); ``LedgerUntrusted`` for
    an unsigned, downgraded, tampered or wrong-key ledger: its scores are no board."""
    result = verify_ledger(ledger, head, public_key)
    if not result.signed:
        raise LedgerUntrusted(f"{ledger.path.name} is not shown: {result.status}: {result.message}")
    return ledger.events(), result
