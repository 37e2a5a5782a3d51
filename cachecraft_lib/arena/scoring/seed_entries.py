"""The looks a plan's own seeds' entries recorded, and the plan author's other looks between the plan and an entry.

Why: a plan with several random seeds has one chance per seed, and two seeds' runs may choose one program, so the
look recorded by another seed's entry at the same program is that seed's, not this one's (``count_looks``). A
third red team (2026-12-05) used that exemption as a peek: hand-made entries of the exact pick, tagged with the
plan's other seeds, were never counted. Only the look recorded by the plan author's preregistered entry for the
other seed (its first, with another run id) is that seed's (``other_seed_looks``). The same red team looked at
other programs, untagged, between the plan and the entry: the plan's test items seen after the plan was fixed
and before its pick was entered, which no tag or program digest ties to the plan. ``peeks_between`` lists them:
every test look of the plan's author on the plan's board and round after the plan and before the entry, less
the looks its own seeds' entries recorded.
"""

from __future__ import annotations

from .events import Kind
from .ledger_fields import author_of, claims_plan, payload, plan_owner, plan_seeds


def entry_look(events: list[dict], entry: dict) -> int | None:
    """The seq of the look an entry recorded (``Arena.submit``: the last ``test_look`` before it by its author at
    its program; an old entry without ``code_sha256``: under its name), or None."""
    body, seq = payload(entry), _seq(entry)
    field, value = ("program", body.get("code_sha256")) if body.get("code_sha256") else ("name", body.get("name"))
    if seq is None or not isinstance(value, str) or not value:
        return None
    for e in reversed(events[:seq]):
        data = payload(e)
        if e.get("kind") == Kind.TEST_LOOK and data.get(field) == value and author_of(data) == author_of(body):
            return _seq(e)
    return None


def seed_entries(events: list[dict], plan_event: dict, owner: str = "") -> dict[int, dict]:
    """Per random seed of the plan, the first entry by its author (``owner`` when the plan names none) claiming
    the plan and that seed: at most one per seed."""
    plan = payload(plan_event)
    full, owner = str(plan.get("plan_hash")), plan_owner(plan) or owner
    found: dict[int, dict] = {}
    for seed in set(plan_seeds(plan)):
        first = next((e for e in events if claims_plan(e, full, seed, owner)), None)
        if first is not None:
            found[seed] = first
    return found


def _run_id(entry: dict | None) -> object:
    origin = payload(entry).get("origin") if entry else None
    return origin.get("run_id") if isinstance(origin, dict) else None


def other_seed_looks(events: list[dict], plan_event: dict, seed: int, entry: dict | None, owner: str = "") \
        -> set[int]:
    """The looks recorded by the plan author's entries for the plan's *other* seeds whose run id differs from
    ``entry``'s: the only looks at the entry's program ``count_looks`` leaves to another seed."""
    mine = _run_id(entry)
    looks = set()
    for other, e in seed_entries(events, plan_event, owner).items():
        look = entry_look(events, e)
        if other != seed and look is not None and _run_id(e) != mine:
            looks.add(look)
    return looks


def peeks_between(events: list[dict], plan_event: dict, entry: dict) -> tuple[int, ...]:
    """Seqs of the plan author's test looks on the plan's board and round after the plan and before ``entry``,
    other than the looks the plan's own seeds' entries (this one included) recorded (module doc)."""
    plan, start, stop = payload(plan_event), _seq(plan_event), _seq(entry)
    if start is None or stop is None:
        return ()
    owner = plan_owner(plan) or author_of(payload(entry))
    before = events[: stop + 1]
    own = {entry_look(before, e) for e in seed_entries(before, plan_event, owner).values()} | {
        entry_look(events, entry)}
    return tuple(s for e in events if e.get("kind") == Kind.TEST_LOOK
                 and (s := _seq(e)) is not None and start < s < stop and s not in own
                 and payload(e).get("board") == plan.get("board") and payload(e).get("round") == plan.get("round")
                 and author_of(payload(e)) == owner)


def _seq(event: dict) -> int | None:
    """An event's seq when it is a non-negative int (a malformed one names nothing)."""
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
