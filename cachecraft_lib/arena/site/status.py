"""The ledger's verification status for the site: checked once, shown on every page.

One function, ``check_ledger``, asks the ledger whether its chain and signatures verify (``Ledger.verify``,
against the key the organiser pinned outside the arena folder: ``--public-key`` or a published head);
everything the site shows comes from the events it returns. The words shown follow ``verify``: "verified" only
against a pinned key; "signed, key not pinned" when the signatures hold under the folder's own ``ledger.pub``
(whoever writes the folder could have replaced it); anything else is not verified, each page sits under a
banner saying so, and where the chain itself broke only the lines before the first bad one are shown. A ledger
without signatures (stripped, or from before signing) is refused outright (``LedgerUntrusted``): no page of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..scoring.ledger import GENESIS, Ledger, LedgerTampered
from ..scoring.verify import LedgerUntrusted, Verification


@dataclass(frozen=True)
class LedgerStatus:
    """What the check found: ``ok`` only when verified against a pinned key; ``clean`` when chain and signatures
    hold (pinned or not: no banner); ``status``: "chain" when the chain broke, else ``Ledger.verify``'s status
    (``verify.STATUSES``); ``state``: the words shown for it."""

    path: Path
    ok: bool
    events: list[dict] = field(repr=False)
    head: str
    count: int
    message: str
    head_file: str
    signatures: str
    status: str = "ok"
    state: str = "verified"

    @property
    def clean(self) -> bool:
        return self.status in ("ok", "unpinned")


def check_ledger(path: str | Path, public_key: str | None = None, head: str | Path | None = None) -> LedgerStatus:
    """Verify the ledger at ``path`` against ``public_key`` (key or fingerprint) / a published ``head``; on a
    broken chain keep the verified lines before the bad one; ``LedgerUntrusted`` for an unsigned ledger."""
    ledger = Ledger(path)
    if not ledger.path.exists():
        raise FileNotFoundError(f"no ledger at {ledger.path}; run `cachecraft arena baselines` first or pass --root")
    head_file = _head_file(ledger)
    try:
        events = ledger.events()
    except LedgerTampered as err:
        _refuse_unsigned(ledger, str(err))
        prefix = _lines_before(ledger.path, err.line)
        message = str(err).replace(str(ledger.path), ledger.path.name)  # no organiser's path on a public page
        return LedgerStatus(ledger.path, False, prefix, prefix[-1]["hash"] if prefix else GENESIS, len(prefix),
                            message, head_file, "not checked (the chain failed first)", "chain", "FAILED")
    result = ledger.verify(head=head, public_key=public_key)
    _refuse_unsigned(ledger, result.message)
    last = events[-1]["hash"] if events else GENESIS
    text = _signatures(ledger, result)
    message = {"ok": "hash chain and signatures verified against the pinned key",
               "unpinned": "hash chain and signatures hold; signed, key not pinned (pass --public-key)"}.get(
        result.status, f"not verified ({result.status}): {text}")
    state = result.shown if result.signed else f"NOT VERIFIED ({result.status})"
    return LedgerStatus(ledger.path, result.ok, events, last, len(events), message, head_file, text, result.status,
                        state)


def _refuse_unsigned(ledger: Ledger, why: str) -> None:
    """No site of a ledger without its public key: signatures stripped (a downgrade) or never there."""
    if ledger.public_key() is None:
        reason = why.replace(str(ledger.path.parent) + "/", "")
        raise LedgerUntrusted(f"{ledger.path.name} has no signatures to check ({reason}); a site is only written "
                              "for a signed ledger")


def _signatures(ledger: Ledger, result: Verification) -> str:
    """The signatures' line: the key they verify under and whether it was pinned."""
    if result.signed:
        return f"{result.shown} (organiser key {result.fingerprint})"
    return f"{result.status}: {result.message}".replace(f"{ledger.path.parent}/", "")


def _head_file(ledger: Ledger) -> str:
    if not ledger.head_path.exists():
        return f"absent ({ledger.head_path.name}): cutting lines off the end could not be detected"
    try:
        head = json.loads(ledger.head_path.read_text())
        return f"{ledger.head_path.name}: {head['events']} events, {head['hash']}"
    except (ValueError, KeyError, TypeError):
        return f"{ledger.head_path.name} is unreadable"


def _lines_before(path: Path, bad_line: int) -> list[dict]:
    """The events on the lines before ``bad_line`` (1-based): the chain verified them before it broke."""
    lines = path.read_text(encoding="utf-8").splitlines()[: max(0, bad_line - 1)]
    return [json.loads(line) for line in lines]
