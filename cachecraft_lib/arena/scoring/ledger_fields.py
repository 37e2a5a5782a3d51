"""The ledger's fields as a claim reads them, parsed leniently (``plan_looks``, ``seed_entries``, ``claims``).

Why a module of its own: every value comes from a ledger anyone can write a metadata.yaml into, so each is read
by one lenient parser here (a bad one is ignored, never a crash), shared by the count of looks and the checks
built on it without an import cycle between them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable

from .events import Kind

SEED_LIMIT = 2 ** 31  # random seeds are 0 <= s < 2**31 (metadata, plans, the CLI)
PREFIX = 16  # the digits an older origin or look names its plan by
HEX = re.compile(r"^[0-9a-f]+$")


def payload(event: dict) -> dict:
    data = event.get("payload", event)
    return data if isinstance(data, dict) else {}


def as_seed(value: object) -> int | None:
    """A random seed as the ledger may hold it: an int in [0, 2**31), else None (never raises)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SEED_LIMIT else None


def _key(author: object) -> str:
    from ..submissions.identity import author_key

    return author_key(str(author or "")) if author else ""


def author_of(data: dict) -> str:
    """An event's normalised author (``author_key``, else ``author``)."""
    return _key(data.get("author_key") or data.get("author"))


def is_hash(value: object, lengths: tuple[int, ...] = (PREFIX, 64)) -> bool:
    return isinstance(value, str) and len(value) in lengths and bool(HEX.match(value))


def names_plan(data: dict, plan_hash: str) -> bool:
    """Does an origin's or look's tag name this plan? Its full ``plan_hash`` exactly when it has one, else its
    ``plan`` (a full hash exactly, or, in older ledgers, the first 16 digits)."""
    full = data.get("plan_hash")
    if full is not None:
        return is_hash(full, (64,)) and full == plan_hash
    tag = data.get("plan")
    return is_hash(tag) and (tag == plan_hash if len(tag) == 64 else plan_hash.startswith(tag))


def is_tagged(data: dict) -> bool:
    return data.get("plan") is not None or data.get("plan_hash") is not None


def valid_plans(events: Iterable[dict]) -> list[dict]:
    """The ``plan`` events whose content matches their hash (an altered plan names nothing)."""
    return [e for e in events if e.get("kind") == Kind.PLAN and is_hash(payload(e).get("plan_hash"), (64,))
            and _plan_digest(payload(e)) == payload(e)["plan_hash"]]


def _plan_digest(body: dict) -> str:
    text = json.dumps({k: v for k, v in body.items() if k != "plan_hash"}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def claims_plan(event: dict, plan_hash: str, seed: int | None, owner: str = "") -> bool:
    """A ``submission`` whose origin claims this plan and random seed (by ``owner``, an author key, when given:
    another author's entry naming a public plan is that author's claim, not the plan's look)."""
    origin = payload(event).get("origin")
    return (event.get("kind") == Kind.SUBMISSION and isinstance(origin, dict)
            and origin.get("registration") == "preregistered" and names_plan(origin, plan_hash)
            and as_seed(origin.get("random_seed")) == seed and (not owner or author_of(payload(event)) == owner))


def plan_owner(plan: dict) -> str:
    """The plan's author key ('' for a plan recorded before plans named their author)."""
    return _key(plan.get("author_key") or plan.get("author"))


def well_formed(event: object) -> bool:
    """An event the claim can read: a dict with an int ``seq`` (not a bool, >= 0) and a dict ``payload``."""
    if not isinstance(event, dict):
        return False
    seq = event.get("seq")
    return isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 and isinstance(event.get("payload"), dict)


def sanitized(events: Iterable[dict]) -> list[dict]:
    """``events`` with each malformed one (``well_formed``) replaced, in place, by an event of kind ``malformed``
    that nothing counts: a hash-valid but odd payload is skipped, never a crash, and the positions (which the
    checks slice by seq) stay."""
    return [e if well_formed(e) else {"seq": i, "kind": "malformed", "payload": {}} for i, e in enumerate(events)]


def plan_seeds(plan: dict) -> list[int]:
    """A plan's random seeds as the ledger holds them, each valid one (``as_seed``); [] when not a list."""
    seeds = plan.get("random_seeds")
    return [s for s in (as_seed(v) for v in seeds) if s is not None] if isinstance(seeds, list) else []
