"""Test looks counted against a pre-registered plan and random seed: the one count the claim and the site share.

Why one function: a referee reads a search entry's claim (``arena.scoring.claims.claim_verdict``) and the board page's
table of looks per plan (``leaderboard.test_looks_by_plan``); they must agree. ``count_looks`` takes a plan
event, a random seed and optionally the entry claiming them, and sorts the ``test_look`` events **of the plan's
board and round** into:

- ``counted``: looks that spend the plan's one chance at the test items: every look at the entry's program
  (its ``program`` hash, its normalised digest ``program_ast``: the code without comments and docstrings, its
  ``program_shape``: its own names canonical too, ``code_shape``, its ``program_behaviour``: the tokens it
  keeps, ``behaviour``, exactly, or its ``program_sketch``: nearly the same tokens kept on the same board and
  round's test contexts, ``behaviour_sketch``; compared on the fields both events hold),
  whatever its plan tag or author (except the look recorded by the plan author's first preregistered entry for
  another of the plan's seeds from another run, which may have chosen the same program:
  ``seed_entries.other_seed_looks``), and every look the plan's author tagged with the plan and seed, up to and
  including the entry's own. More than one fails the claim.
- ``after``: the same kinds of look after the entry (shown, labelled, never counted for the entry).
- ``foreign``: looks another author tagged with the plan and seed, at another program: anyone can copy a public
  plan hash into a metadata.yaml, so these are listed apart and fail nobody's claim.
- ``family``: the looks and entries of *earlier* plans of the same family (board, seed program: its SHA-256
  or its normalised digest, random seed) for this seed: plans that differ only in notes, split seed or a
  comment in the seed program are one chance, not several.

A plan is named by its full hash (``plan_hash``) in new origins and looks; older ledgers name it by the first
16 hex digits (``plan``), still read. Every value comes from a ledger anyone can write a metadata.yaml into, so
each is parsed leniently (``as_seed``): a bad one is ignored, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from .behaviour_sketch import near
from .code_shape import code_digest, look_digests, shape_digest  # noqa: F401 (re-exported: arena, preregister)
from .events import Kind
from .ledger_fields import (  # noqa: F401 (re-exported: claims, preregister, leaderboard)
    PREFIX,
    SEED_LIMIT,
    as_seed,
    author_of,
    claims_plan,
    is_hash,
    is_tagged,
    names_plan,
    payload,
    plan_owner,
    plan_seeds,
    sanitized,
    valid_plans,
)
from .seed_entries import other_seed_looks


def family_of(plan: dict) -> str:
    """The plan's family, without the random seed: board and seed program (its normalised digest where the plan
    records one, else its SHA-256; 12 digits shown)."""
    return f"{plan.get('board')}/{str(plan.get('seed_ast') or plan.get('seed_sha256', ''))[:12]}"


def same_seed_program(a: dict, b: dict) -> bool:
    """Two plans start from one seed program: the same SHA-256, normalised digest (comments and docstrings aside)
    or names-free digest (``seed_shape``, names renamed too), compared where both plans hold it."""
    return any(bool(a.get(k)) and a.get(k) == b.get(k) for k in ("seed_sha256", "seed_ast", "seed_shape"))


def first_of_family(events: list[dict], plan_event: dict) -> dict:
    """The first valid plan of ``plan_event``'s family for a claim: the same author, board, seed program and
    round, over all random seeds (second red team: five one-seed plans are five chances, not one). Its random
    seeds are the family's; ``plan_event`` itself when no earlier plan is of its family."""
    plan = payload(plan_event)
    for p in valid_plans(events[: plan_event.get("seq", 0)]):
        other = payload(p)
        if plan_owner(other) == plan_owner(plan) and other.get("board") == plan.get("board") \
                and other.get("round") == plan.get("round") and same_seed_program(other, plan):
            return p
    return plan_event


@dataclass(frozen=True)
class LookCount:
    """A plan and seed's test looks on its board and round (seqs of ``test_look`` events; module doc)."""

    plan_hash: str
    random_seed: int
    board: str
    round: object
    family: str
    counted: tuple[int, ...]
    after: tuple[int, ...]
    foreign: tuple[int, ...]
    family_events: tuple[int, ...]
    tagged_counted: int  # counted looks that carry this plan's tag
    tags_before: bool  # some look before the entry carries a plan tag (the ledger is from after tags existed)
    round_before_plan: int  # looks on the plan's board and round recorded before the plan
    authors: tuple[str, ...]
    names: tuple[str, ...]


def count_looks(events: list[dict], plan_event: dict, seed: int, entry: dict | None = None) -> LookCount:
    """The looks of ``plan_event``'s board and round, sorted for the plan and random ``seed`` (module doc);
    ``entry``: the submission claiming them (its program's looks count, whatever their tag)."""
    plan, full = payload(plan_event), str(payload(plan_event).get("plan_hash"))
    owner = plan_owner(plan) or (author_of(payload(entry)) if entry else "")
    body = payload(entry) if entry else {}
    programs = entry_programs(events, body) if entry else set()
    sketches = entry_sketches(events, body) if entry else []
    stop = entry.get("seq", len(events)) if entry else len(events)
    others = other_seed_looks(events, plan_event, seed, entry, owner) if entry else set()
    counted, after, foreign, authors, names = [], [], [], [], []
    tagged_counted, tags_before, before_plan = 0, False, 0
    for e in events:
        data = payload(e)
        if e.get("kind") != Kind.TEST_LOOK:
            continue
        seq = e.get("seq", 0)
        tags_before |= seq < stop and is_tagged(data)
        if data.get("board") != plan.get("board") or data.get("round") != plan.get("round"):
            continue
        before_plan += seq < plan_event.get("seq", 0)
        tagged = names_plan(data, full) and as_seed(data.get("random_seed")) == seed
        same = bool(programs & look_programs(data)) or sketch_matches(sketches, data)
        if not same and not tagged or same and not tagged and seq in others:
            continue  # another seed's entry's own look (two seeds' runs may choose one program) is that seed's
        if not same and owner and author_of(data) != owner:
            foreign.append(seq)
            continue
        (counted if seq < stop else after).append(seq)
        tagged_counted += tagged and seq < stop
        authors.append(str(data.get("author")))
        names.append(str(data.get("name")))
    return LookCount(full, seed, str(plan.get("board")), plan.get("round"), family_of(plan), tuple(counted),
                     tuple(after), tuple(foreign), _family_events(events, plan_event, seed, stop), tagged_counted,
                     tags_before, before_plan, tuple(dict.fromkeys(authors)), tuple(dict.fromkeys(names)))


LOOK_FIELDS = ("program", "program_ast", "program_shape", "program_behaviour")  # a look's digests, finest first
ENTRY_FIELDS = ("code_sha256", "code_ast", "code_shape", "code_behaviour")  # the same, as an entry names them


def look_programs(data: dict) -> set[str]:
    """A look's digests of its program: SHA-256, ``program_ast``, ``program_shape`` (``code_shape``) and
    ``program_behaviour`` (``behaviour``), as held."""
    return {p for p in (data.get(k) for k in LOOK_FIELDS) if isinstance(p, str) and p}


def entry_programs(events: list[dict], body: dict) -> set[str]:
    """An entry's digests of its program: its SHA-256, ``code_ast``, ``code_shape``, ``code_behaviour``, and the
    digests of any look at the same SHA-256 (the entry's own look records them). Each is a coarser function of
    the program (SHA-256; comments and docstrings aside; names too; then only the tokens it keeps on its probe's
    inputs: public dev contexts in older ledgers, the round's test contexts, keyed, since), so a look matching on any one both events hold is a look at this program or at one doing the same
    there (the shape and behaviour digests hash a prefix of their own: no two kinds match by accident)."""
    sha = body.get("code_sha256")
    found = {p for p in (body.get(k) for k in ENTRY_FIELDS) if isinstance(p, str) and p}
    for e in events:
        if e.get("kind") == Kind.TEST_LOOK and isinstance(sha, str) and payload(e).get("program") == sha:
            found |= look_programs(payload(e))
    return found


def entry_sketches(events: list[dict], body: dict) -> list[tuple[object, object, str]]:
    """An entry's behaviour sketches with the board and round each was made on: its ``code_sketch`` and the
    ``program_sketch`` of any look at the same SHA-256 (``behaviour_sketch``: keyed by the round's secret)."""
    sha, found = body.get("code_sha256"), []
    if isinstance(body.get("code_sketch"), str):
        found.append((body.get("board"), body.get("round"), body["code_sketch"]))
    for e in events:
        data = payload(e)
        if e.get("kind") == Kind.TEST_LOOK and isinstance(sha, str) and data.get("program") == sha \
                and isinstance(data.get("program_sketch"), str):
            found.append((data.get("board"), data.get("round"), data["program_sketch"]))
    return found


def sketch_matches(sketches: list[tuple[object, object, str]], data: dict) -> bool:
    """Is a look at a program keeping nearly the tokens one of ``sketches`` keeps? Its ``program_sketch`` of the
    same board and round at estimated Jaccard similarity >= ``behaviour_sketch.THRESHOLD`` (another round's key
    makes other sketches: never compared)."""
    theirs = data.get("program_sketch")
    return any(board == data.get("board") and round_ == data.get("round") and near(mine, theirs)
               for board, round_, mine in sketches)


def _family_events(events: list[dict], plan_event: dict, seed: int, stop: int) -> tuple[int, ...]:
    """Looks (by each earlier plan's author) and entries of earlier plans of the family for ``seed``, before
    ``stop``."""
    plan = payload(plan_event)
    earlier = [p for p in valid_plans(events[: plan_event.get("seq", 0)])
               if payload(p).get("board") == plan.get("board") and seed in plan_seeds(payload(p))
               and same_seed_program(payload(p), plan)
               and payload(p).get("plan_hash") != plan.get("plan_hash")]
    found = []
    for p in earlier:
        full, owner = str(payload(p)["plan_hash"]), plan_owner(payload(p))
        for e in events[:stop]:
            data = payload(e)
            look = (e.get("kind") == Kind.TEST_LOOK and names_plan(data, full) and as_seed(data.get("random_seed")) == seed
                    and (not owner or author_of(data) == owner))
            if look or claims_plan(e, full, seed, owner):
                found.append(e.get("seq", 0))
    return tuple(sorted(set(found)))


LOOK_COLUMNS = ["board", "round", "plan", "family", "random_seed", "looks", "after", "foreign", "family_looks",
                "family_total", "family_seeds", "authors", "names", "note"]
NO_PLAN = "no plan"


def looks_table(events: Iterable[dict]) -> pd.DataFrame:
    """Per recorded plan and random seed, ``count_looks`` against the entry claiming them (if any): ``looks``
    up to and including the entry, ``after`` it, ``foreign`` (others' tagged looks at other programs, not
    counted), ``family_looks`` (every counted look of the family's plans for the seed, this one included; a
    family has one chance per seed), ``family_total`` (the looks of every plan and seed of the claim's family,
    ``first_of_family``: author, board, seed program, round) and ``family_seeds`` (how many seeds its first plan
    registered: a total above it means plans beyond the first were looked at). Then tagged looks naming no recorded plan (``note`` says so) and, per
    board, the looks no plan row holds (``NO_PLAN``: baselines, hand-made entries)."""
    events = sanitized(events)  # a malformed event is skipped, never a crash
    rows, held = [], set()
    plans = valid_plans(events)
    for p in plans:
        for seed in plan_seeds(payload(p)):
            full = str(payload(p)["plan_hash"])
            entry = next((e for e in events if claims_plan(e, full, seed, plan_owner(payload(p)))), None)
            c = count_looks(events, p, seed, entry)
            held |= set(c.counted + c.after + c.foreign)
            first = first_of_family(events, p)
            rows.append({"board": c.board, "round": c.round, "plan": full[:PREFIX], "family": c.family,
                         "first_plan": str(payload(first)["plan_hash"]), "family_seeds": len(plan_seeds(payload(first))),
                         "random_seed": seed, "looks": len(c.counted), "after": len(c.after),
                         "foreign": len(c.foreign), "authors": ", ".join(c.authors), "names": ", ".join(c.names),
                         "note": "" if entry else "no entry claims it"})
    known = [str(payload(p)["plan_hash"]) for p in plans]
    for e in events:
        data = payload(e)
        if e.get("kind") != Kind.TEST_LOOK or e.get("seq") in held:
            continue
        tag = data.get("plan_hash") if data.get("plan_hash") is not None else data.get("plan")
        named = is_tagged(data) and any(names_plan(data, h) for h in known)
        seed = as_seed(data.get("random_seed"))
        rows.append({"board": data.get("board"), "round": data.get("round"),
                     "plan": str(tag)[:PREFIX] if is_tagged(data) else NO_PLAN, "family": "",
                     "random_seed": seed if is_tagged(data) else None, "looks": 1, "after": 0, "foreign": 0,
                     "authors": str(data.get("author")), "names": str(data.get("name")),
                     "note": "" if not is_tagged(data) else ("outside the plan's board, round or seeds" if named
                                                              else "names no recorded plan")
                     + ("; its random seed is not 0 <= s < 2**31" if data.get("random_seed") is not None
                        and seed is None else "")})
    return _grouped(pd.DataFrame(rows, columns=[c for c in LOOK_COLUMNS if c not in ("family_looks", "family_total")]
                                 + ["first_plan"]))


def _grouped(table: pd.DataFrame) -> pd.DataFrame:
    def joined(values: pd.Series) -> str:
        return ", ".join(dict.fromkeys(v for s in values if s for v in str(s).split(", ")))

    table["random_seed"] = table.random_seed.astype("Int64")
    keys = ["board", "plan", "random_seed"]
    out = table.groupby(keys, dropna=False, sort=False, as_index=False).agg(
        round=("round", "first"), family=("family", "first"), looks=("looks", "sum"), after=("after", "sum"),
        foreign=("foreign", "sum"), authors=("authors", joined), names=("names", joined), note=("note", joined),
        first_plan=("first_plan", "first"), family_seeds=("family_seeds", "first"))
    family = out.family.where(out.family != "", out.plan)
    out["family_looks"] = out.looks.groupby([out.board, family, out.random_seed], dropna=False) \
        .transform("sum")
    first = out.first_plan.where(out.first_plan.notna() & (out.first_plan != ""), out.plan)
    out["family_total"] = out.looks.groupby([out.board, first], dropna=False).transform("sum")
    out["family_seeds"] = out.family_seeds.astype("Int64")
    return out.sort_values(keys, kind="stable").reset_index(drop=True)[LOOK_COLUMNS]
