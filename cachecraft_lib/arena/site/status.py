"""The ledger's verification status for the site: checked once, shown on every page.

One function, ``check_ledger``, asks the ledger whether its chain (and, where the ledger version has them, its
signatures: ``Ledger.verify``) verifies; everything the site shows comes from the events it returns. A ledger
that does not verify is not drawn as a clean board: the status says what failed, and only the lines before the
first bad one are shown, each page under a banner saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..ledger import GENESIS, Ledger, LedgerTampered


@dataclass(frozen=True)
class LedgerStatus:
    """What the check found: ``ok`` only when the whole chain (and head, and signatures if any) verifies."""

    path: Path
    ok: bool
    events: list[dict] = field(repr=False)
    head: str
    count: int
    message: str
    head_file: str
    signatures: str


def check_ledger(path: str | Path) -> LedgerStatus:
    """Verify the ledger at ``path`` through its own API; on failure keep the verified lines before the bad one."""
    ledger = Ledger(path)
    if not ledger.path.exists():
        raise FileNotFoundError(f"no ledger at {ledger.path}; run `cachecraft arena baselines` first or pass --root")
    head_file = _head_file(ledger)
    try:
        events = ledger.events()
    except LedgerTampered as err:
        prefix = _lines_before(ledger.path, err.line)
        message = str(err).replace(str(ledger.path), ledger.path.name)  # no organiser's path on a public page
        return LedgerStatus(ledger.path, False, prefix, prefix[-1]["hash"] if prefix else GENESIS, len(prefix),
                            message, head_file, "not checked (the chain failed first)")
    signed, sig_text = _signatures(ledger)
    head = events[-1]["hash"] if events else GENESIS
    return LedgerStatus(ledger.path, signed, events, head, len(events),
                        "hash chain verified" if signed else f"signatures do not verify: {sig_text}", head_file,
                        sig_text)


def _signatures(ledger: Ledger) -> tuple[bool, str]:
    """Signatures, where this ledger version has them (``Ledger.verify`` returning a status with ``ok``,
    ``status`` and ``message``); a chain-only ledger says so."""
    verify = getattr(ledger, "verify", None)
    if not callable(verify):
        return True, "none (this ledger version is hash-chained, not signed)"
    try:
        result = verify()
    except Exception as err:  # any failure of a signature check is a failed check, reported as such
        return False, str(err)
    status, message = str(getattr(result, "status", "")), str(getattr(result, "message", result))
    if status == "unsigned":
        return True, f"none: {message}"
    if getattr(result, "ok", False):
        fingerprint = getattr(result, "fingerprint", None)
        return True, "verified" + (f" (organiser key {fingerprint})" if fingerprint else "")
    return False, f"{status or 'failed'}: {message}"


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
