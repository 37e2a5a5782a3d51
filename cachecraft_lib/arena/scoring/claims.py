"""A search entry's claim to be pre-registered, checked against the ledger (its run: ``search.preregister.verify_claim``).

Why: ``registration: preregistered`` is a line anyone can write into a metadata.yaml. ``claim_verdict`` checks
what the ledger can show (red team, issue 49): a plan event earlier in the ledger, unaltered, named by the
origin (its full hash; older entries by 16 digits, which must name one plan only), for the entry's board, seed
program, random seed and **round**, whose statement about its round holds, recorded by **the entry's author**;
its random seed one the first plan of its family (author, board, seed program, round) registered; no
earlier entry of the plan and seed; at most one look at the plan's board and round that counts
(``arena.scoring.plan_looks.count_looks``: every look at the entry's program whatever its tag or author, and the
author's looks tagged with the plan and seed, the entry's own included); no other look by the plan's author on
its board and round between the plan and the entry but its own seeds' entries' (``seed_entries.peeks_between``);
no earlier plan of the same family
(board, seed program, random seed) that already had a look or entry for the seed; and, once looks carry plan
tags, a tagged look of its own. The ledger cannot show that the program is the one the plan's run chose:
without the run folder the verdict says "claimed, not verified against its run". ``verify_claim`` adds the
run: its registration (``preregister.check_registration``, the same plan), the selection rule
(``selection.selection_broken``), the chosen child's id and the SHA-256 of the method.py its code converts to
(``submit.converted_method``) equal to the entry's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath

from .events import Kind
from .ledger_fields import plan_seeds, sanitized, well_formed
from .plan_looks import (
    LookCount,
    as_seed,
    author_of,
    claims_plan,
    count_looks,
    first_of_family,
    is_hash,
    names_plan,
    payload,
    plan_owner,
    valid_plans,
)
from .seed_entries import peeks_between

NOT_VERIFIED = "claimed, not verified against its run"


@dataclass(frozen=True)
class Claim:
    """A submission's pre-registration claim checked (``claim_verdict``/``verify_claim``). ``looks``: looks that
    count against it up to and including its own (one is the plan); ``plan_looks``: looks tagged with its plan,
    every seed, on the plan's board; ``reason``: why it fails, or, when it holds, what it rests on."""

    holds: bool
    looks: int
    plan_looks: int
    reason: str = ""
    family_looks: int = 0
    later_looks: int = 0
    foreign_looks: int = 0
    round_looks_before_plan: int | None = None
    verified: bool = False
    plan_hash: str = ""
    unsketched_looks: int = 0  # looks on the board and round before the entry with no sketch to match (shown)


def _named_plans(events: list[dict], origin: dict) -> list[dict]:
    return [p for p in valid_plans(events) if names_plan(origin, payload(p)["plan_hash"])]


def seed_name(value: object) -> str | None:
    """A seed program as an origin names it: a shipped seed's name, or a seed file's stem (``submit.run_origin``
    writes the stem of run_info's ``seed=``, which may be a path), so a plan and an origin compare like with like."""
    return PurePath(value).stem if isinstance(value, str) and value else None


def _plan_broken(events: list[dict], plan_event: dict, entry: dict, origin: dict) -> str:
    """Why the plan does not vouch for this entry, or ''."""
    plan, body = payload(plan_event), payload(entry)
    seed = as_seed(origin.get("random_seed"))
    if plan.get("board") != body.get("board"):
        return f"the plan is for board {plan.get('board')}, the entry is on {body.get('board')}"
    if seed_name(plan.get("seed_program")) is None or seed_name(plan.get("seed_program")) != seed_name(origin.get("seed")):
        return f"the plan's seed program is {plan.get('seed_program')}, the entry's origin says {origin.get('seed')}"
    if seed is None or seed not in plan_seeds(plan):
        return f"random seed {origin.get('random_seed')!r} is not one of the plan's {plan.get('random_seeds')}"
    if body.get("round", 1) != plan.get("round"):
        return f"the entry was scored on round {body.get('round', 1)}, the plan names round {plan.get('round')}"
    owner = plan.get("author_key") or plan.get("author")
    if owner and author_of({"author_key": owner}) != author_of(body):
        return f"the plan was recorded by {plan.get('author')!r}, the entry is by {body.get('author')!r}"
    return round_claim_broken(events, plan_event)


def claim_verdict(events: list[dict], entry: dict) -> Claim:
    """The entry's claim checked against the ledger ``events`` (module doc); it states the looks either way. A
    malformed event is skipped (``ledger_fields.sanitized``); a malformed entry fails."""
    if not well_formed(entry):
        return Claim(False, 0, 0, "the entry's event is malformed (its seq or payload): it claims nothing")
    events = sanitized(events)
    body = payload(entry)
    origin = body.get("origin") if isinstance(body.get("origin"), dict) else {}
    seq = entry.get("seq", len(events))
    before = events[:seq]
    fail = Claim(False, 0, 0)
    tag = origin.get("plan_hash") if origin.get("plan_hash") is not None else origin.get("plan")
    if origin.get("registration") != "preregistered" or not is_hash(tag):
        return replace(fail, reason="the entry does not claim a plan (registration preregistered and a plan hash)")
    named = _named_plans(before, origin)
    if len(named) != 1:
        return replace(fail, reason="no earlier, unaltered plan has this hash" if not named else
                       f"the plan prefix {tag} names {len(named)} plans: ambiguous")
    plan_event = named[0]
    full, seed = str(payload(plan_event)["plan_hash"]), as_seed(origin.get("random_seed"))
    count = count_looks(events, plan_event, seed if seed is not None else -1, entry)
    plan_looks = sum(1 for e in events if e.get("kind") == Kind.TEST_LOOK and names_plan(payload(e), full)
                     and payload(e).get("board") == payload(plan_event).get("board"))
    fresh = payload(plan_event).get("round_commitment") is None
    blind = unsketched(before, payload(plan_event), body)
    claim = Claim(False, len(count.counted), plan_looks, "", len(count.family_events), len(count.after),
                  len(count.foreign), None if fresh else count.round_before_plan, False, full, len(blind))
    owner = plan_owner(payload(plan_event)) or author_of(body)
    broken = _plan_broken(events, plan_event, entry, origin) or _family_seed_broken(events, plan_event, seed) \
        or _looks_broken(before, full, seed, count, owner) or _peeks_broken(events, plan_event, entry)
    if broken:
        return replace(claim, reason=broken)
    return replace(claim, holds=True, reason=_notes(plan_event, count, fresh, blind))


def unsketched(before: list[dict], plan: dict, body: dict) -> tuple[int, ...]:
    """The seqs of looks on the plan's board and round before the entry that carry no ``program_sketch`` and are
    not at the entry's program by hash, baselines aside (sixth red team: a probe, whole-cache or decode-time hook,
    a failing probe or an older look has no behaviour to match, so a copy of the program behind one passes unseen;
    the verdict shows how many such looks there are rather than passing silently)."""
    return tuple(e.get("seq", 0) for e in before if e.get("kind") == Kind.TEST_LOOK
                 and payload(e).get("board") == plan.get("board") and payload(e).get("round") == plan.get("round")
                 and not payload(e).get("program_sketch") and payload(e).get("program") != body.get("code_sha256")
                 and not str(payload(e).get("program", "")).startswith("baseline:"))


def _family_seed_broken(events: list[dict], plan_event: dict, seed: int | None) -> str:
    """Why the claim's random seed is not its family's, or '': the first plan of the same author, board, seed
    program and round fixed the seeds (``plan_looks.first_of_family``); a later plan of the family adding a
    seed is another chance at the same test items, not a new plan (second red team: five one-seed plans)."""
    first = first_of_family(events, plan_event)
    seeds = plan_seeds(payload(first))
    if first is plan_event or seed in seeds:
        return ""
    return (f"random seed {seed} was not registered by the first plan of its family (author, board, seed program, "
            f"round: plan {str(payload(first).get('plan_hash'))[:16]} at seq {first.get('seq')}, random seeds "
            f"{seeds}): a later plan of the family adds no seeds")


def _looks_broken(before: list[dict], full: str, seed: int | None, count: LookCount, owner: str) -> str:
    if any(claims_plan(e, full, seed, owner) for e in before):
        return "an earlier entry claims the same plan and random seed: this is another look"
    if len(count.counted) > 1:
        return (f"{len(count.counted)} test looks at this program or tagged with the plan and random seed {seed} on "
                f"board {count.board}, round {count.round}, up to this entry (seqs {list(count.counted)}): a plan has "
                "one per seed")
    if count.family_events:
        return (f"an earlier plan of the same family (board, seed program, random seed {seed}) already had a look "
                f"or entry (seqs {list(count.family_events)}): a plan differing in notes or split seed is no new "
                "chance")
    if count.tagged_counted == 0 and count.tags_before:
        return "the entry's test look carries no plan tag, although the ledger's looks carry them"
    return ""


def _peeks_broken(events: list[dict], plan_event: dict, entry: dict) -> str:
    """Why the plan author's other looks between the plan and the entry spend its chance, or '' (third red team:
    untagged looks at other programs on the plan's board and round, ``seed_entries.peeks_between``)."""
    peeks = peeks_between(events, plan_event, entry)
    if not peeks:
        return ""
    plan = payload(plan_event)
    return (f"the plan's author had {len(peeks)} other test look(s) on board {plan.get('board')}, round "
            f"{plan.get('round')} after the plan and before this entry (seqs {list(peeks)}): the test items were "
            "seen again before the pick was entered, and only the looks of the plan's own seeds' entries are its")


def _notes(plan_event: dict, count: LookCount, fresh: bool, blind: tuple[int, ...] = ()) -> str:
    notes = [NOT_VERIFIED]
    if blind:
        notes.append(f"{len(blind)} other look(s) on board {count.board}, round {count.round} before the entry carry "
                     f"no behaviour sketch (seqs {list(blind)[:10]}): matched by code digests only")
    if not fresh:
        notes.append(f"the plan names round {count.round}'s existing commitment: that round had "
                     f"{count.round_before_plan} test look(s) on board {count.board} before the plan")
    if not payload(plan_event).get("author"):
        notes.append("the plan names no author (recorded before plans did)")
    if not count.tags_before:
        notes.append("old ledger: its looks carry no plan tag")
    if count.after:
        notes.append(f"{len(count.after)} look(s) after the entry (seqs {list(count.after)})")
    if count.foreign:
        notes.append(f"{len(count.foreign)} look(s) by other authors at other programs tagged with the plan "
                     f"(seqs {list(count.foreign)}), not counted")
    return "; ".join(notes)


def claim_holds(events: list[dict], entry: dict) -> bool:
    """Does a ``submission`` event's claim to be pre-registered hold against the ledger (``claim_verdict``)?"""
    return claim_verdict(events, entry).holds


def round_claim_broken(events: list[dict], plan_event: dict) -> str:
    """Why the plan's statement about its round is false, or ''. A plan says the round's commitment it was made
    under (None: the secret did not exist yet); a ``round`` event for that round earlier in the ledger with another
    commitment, or any when it says None, means the plan was recorded after the test items could be known."""
    plan = payload(plan_event)
    for e in sanitized(events)[: plan_event.get("seq", 0)]:
        data = payload(e)
        if e.get("kind") == Kind.ROUND and data.get("round") == plan.get("round") \
                and data.get("commitment") != plan.get("round_commitment"):
            return (f"the plan (seq {plan_event['seq']}) says round {plan.get('round')}'s commitment was "
                    f"{plan.get('round_commitment')!r}, but the ledger committed it earlier (seq {e['seq']})")
    return ""
