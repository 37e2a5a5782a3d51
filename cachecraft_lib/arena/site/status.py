"""The ledger's verification status for the site: checked once, shown on every page.

One function, ``check_ledger``, asks the ledger whether its chain (and, where the ledger version has them, its
signatures: ``Ledger.verify``) verifies; everything the site shows comes from the events it returns. Only the
status ``ok`` counts as verified: an ``unsigned`` ledger (a chain anyone could recompute), a wrong key or a bad
head is not verified either. A ledger that does not verify is not drawn as a clean board: the status says what
failed, each page sits under a banner saying so, and where the chain itself broke only the lines before the
first bad one are shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..scoring.ledger import GENESIS, Ledger, LedgerTampered


@dataclass(frozen=True)
class LedgerStatus:
    """What the check found: ``ok`` only when the whole chain, head and signatures verify (``status`` "ok");
    ``status``: "chain" when the chain broke, else ``Ledger.verify``'s status (``verify.STATUSES``)."""

    path: Path
    ok: bool
    events: list[dict] = field(repr=False)
    head: str
    count: int
    message: str
    head_file: str
    signatures: str
    status: str = "ok"


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
                            message, head_file, "not checked (the chain failed first)", "chain")
    status, sig_text = _signatures(ledger)
    head = events[-1]["hash"] if events else GENESIS
    signed = status == "ok"
    return LedgerStatus(ledger.path, signed, events, head, len(events),
                        "hash chain verified" if signed else f"not verified ({status}): {sig_text}", head_file,
                        sig_text, status)


def _signatures(ledger: Ledger) -> tuple[str, str]:
    """``(status, text)`` of ``Ledger.verify``; only "ok" is verified (an unsigned chain anyone could recompute
    is not); a ledger version without signatures is "unsigned"."""
    verify = getattr(ledger, "verify", None)
    if not callable(verify):
        return "unsigned", "none (this ledger version is hash-chained, not signed: anyone could recompute it)"
    try:
        result = verify()
    except Exception as err:  # any failure of a signature check is a failed check, reported as such
        return "failed", str(err)
    status, message = str(getattr(result, "status", "") or "failed"), str(getattr(result, "message", result))
    if status == "ok" and getattr(result, "ok", False):
        fingerprint = getattr(result, "fingerprint", None)
        return "ok", "verified" + (f" (organiser key {fingerprint})" if fingerprint else "")
    return ("failed" if status == "ok" else status), f"{status}: {message}".replace(f"{ledger.path.parent}/", "")


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
