"""A round's commitment in the ledger, and the check every verb that uses the secret makes first.

A ``round`` event records ``commitment(secret, round, salt)`` with a fresh random salt (both public) before any
test item is drawn, and how the secret was made: ``origin`` ("generated" by ``arena init``, else "given"), the
strength estimate and ``weak_secret_ok`` when the organiser waived it (``--weak-secret-ok``: anyone reading the
ledger sees it). ``check_round_secret`` runs before anything else in ``record_baselines``, ``submit`` and
``reveal``: the secret must be strong (``splits.check_secret``, unless waived) and, once the round exists,
match its commitment (``SecretMismatch`` otherwise: a wrong secret would score everyone on other items).

``Round`` is the secret, the round's number and its commitment as one value, made by ``open_round`` (the check,
once); the arena's verbs pass it on instead of a (secret, round) pair, so nothing downstream checks again.
``recorded`` writes a new round's commitment (only where the ledger gained the round since it was opened does it
compare again: another process recorded it meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..boards import splits
from ..boards.strength import estimate
from .events import Kind


def round_event(events: list[dict], round_: int) -> dict | None:
    """The payload of ``round_``'s ``round`` event, or None."""
    for e in events:
        data = e.get("payload", e)
        if e.get("kind") == Kind.ROUND and data.get("round") == round_:
            return data
    return None


def matches(secret: bytes, data: dict) -> bool:
    """Does ``secret`` open the commitment in the round payload ``data``?"""
    salt = str(data.get("salt") or "")
    return bool(salt) and splits.verify_reveal(secret, int(data["round"]), str(data.get("commitment", "")), salt)


def check_round_secret(ledger: Any, secret: bytes, round_: int, weak_ok: bool = False,
                       events: list[dict] | None = None) -> dict | None:
    """``SecretMissing`` for a weak secret (unless ``weak_ok``), ``SecretMismatch`` when it does not open the
    round's commitment; the round's payload (None before the round exists). ``events``: already read."""
    splits.check_secret(secret, weak_ok=weak_ok)
    data = round_event(ledger.events() if events is None else events, round_)
    if data is not None and not matches(secret, data):
        raise splits.SecretMismatch(f"the secret does not match round {round_}'s commitment "
                                    f"{str(data.get('commitment'))[:16]}... in {ledger.path}; nothing was run (use "
                                    "the round's secret, or another --round)")
    return data


def ensure_round(ledger: Any, secret: bytes, round_: int, profile: str, weak_ok: bool = False,
                 origin: str = "given") -> dict:
    """The round's payload, recording its salted commitment (and how the secret was made) when the round is new."""
    return recorded(ledger, open_round(ledger, secret, round_, weak_ok), profile, weak_ok, origin).payload or {}


@dataclass(frozen=True)
class Round:
    """A round's secret, number and (once recorded) commitment payload, checked against each other once
    (``open_round``). The secret never shows in a repr."""

    number: int
    secret: bytes = field(repr=False)
    payload: dict | None = None  # the ``round`` event's payload; None until the ledger records the round

    @property
    def commitment(self) -> str | None:
        return None if self.payload is None else str(self.payload.get("commitment"))


def open_round(ledger: Any, secret: bytes | Round, number: int = 1, weak_ok: bool = False,
               events: list[dict] | None = None) -> Round:
    """The one check of a secret for a round (strength, and the commitment once the round exists), as a
    ``Round``; a ``Round`` given is returned as it is (already checked)."""
    if isinstance(secret, Round):
        return secret
    return Round(int(number), secret, check_round_secret(ledger, secret, int(number), weak_ok, events))


def recorded(ledger: Any, rnd: Round, profile: str, weak_ok: bool = False, origin: str = "given") -> Round:
    """``rnd`` with its commitment in the ledger: recorded (salted, with how the secret was made) when the round
    is new; a round another process recorded since ``rnd`` was opened must match it."""
    if rnd.payload is not None:
        return rnd
    data = round_event(ledger.events(), rnd.number)
    if data is not None:
        if not matches(rnd.secret, data):
            raise splits.SecretMismatch(f"the secret does not match round {rnd.number}'s commitment "
                                        f"{str(data.get('commitment'))[:16]}... recorded meanwhile in {ledger.path}")
        return replace(rnd, payload=data)
    salt, strength = splits.new_salt(), estimate(rnd.secret)
    payload = {"round": rnd.number, "profile": profile, "commitment": splits.commitment(rnd.secret, rnd.number, salt),
               "salt": salt, "scheme": splits.COMMITMENT_SCHEME, "secret_origin": origin,
               "secret_estimate_bits": int(strength.bits),
               "weak_secret_ok": bool(weak_ok and strength.bits < splits.MIN_SECRET_BITS)}
    ledger.append(Kind.ROUND, payload)
    return replace(rnd, payload=payload)
