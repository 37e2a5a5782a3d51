"""A search's plan recorded in the arena's ledger before any child is evaluated.

Why: a test number means what it says only when everything that could have been tuned on it was fixed before
it existed. ``record_plan`` appends a signed ``plan`` event: the board, the seed program (name, SHA-256), the
sizes, every random seed, the selection rule, the round's commitment when one exists, who registered it, the
search half's context ids (SHA-256), the comparators (FRC, the selection half's best baseline) and controls
(the seed program, random search at the search's budget) named before the run (``MissingComparators``
otherwise), and the plan's own hash. Each run folder keeps ``plan.json`` and ``run_info.txt``'s ``started=``.

``check_registration`` is what ``arena submit-search`` asks before it touches a secret (the plan is in the
ledger, unaltered, matches the run, and precedes its first evaluation and entries; otherwise
``NotPreregistered`` unless the run is labelled exploratory); ``verify_claim`` checks an entry's claim against
the ledger (``arena.scoring.claims``) and its run folder.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..arena.scoring.claims import (  # noqa: F401 (Claim, claim_holds, claim_verdict: re-exported)
    NOT_VERIFIED,
    Claim,
    claim_holds,
    claim_verdict,
    round_claim_broken,
)
from ..arena.scoring.plan_looks import payload
from .mutator import STRUCTURAL_TAG
from .plan_comparisons import (  # noqa: F401 (the plan's names: re-exported)
    DEFAULT_COMPARATORS,
    DEFAULT_CONTROLS,
    FRC,
    RANDOM_CONTROL,
    SEED_CONTROL,
    SELECTION_BEST,
    MissingComparators,
    check_comparisons,
)

PLAN_FILE = "plan.json"
PREREGISTERED, EXPLORATORY = "preregistered", "exploratory"
DEFAULT_AUTHOR = "cachecraft-search"  # who `arena search` registers and `submit-search` submits as
CONTEXTS_FILE = "fitness_contexts.txt"  # the run's search-half context ids, one per line (board_search)


class NotPreregistered(ValueError):
    """The run's plan was not recorded in this arena's ledger before the run started (the message says why)."""


@dataclass(frozen=True)
class Plan:
    """Everything a search run may not change after it starts."""

    board: str
    profile: str
    seed_program: str
    seed_sha256: str
    generations: int
    population: int
    random_seeds: tuple[int, ...]
    structural: bool
    split_seed: int
    top_k: int
    rule: str
    round: int
    round_commitment: str | None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    author: str = ""
    author_key: str = ""
    search_contexts_sha256: str | None = None
    seed_ast: str | None = None  # the seed program's normalised digest: a comment added to it is no new family
    seed_shape: str | None = None  # its names-free digest (code_shape): nor is the seed with names renamed
    comparators: tuple[str, ...] = ()  # what every seed's program is compared with (DEFAULT_COMPARATORS)
    controls: tuple[str, ...] = ()  # run beside the search, every seed (DEFAULT_CONTROLS)
    criteria: tuple[dict, ...] = ()  # pass criteria read once as verdicts (search.plan_criteria)
    selection_per_task: int | None = None  # the selection half's fewest contexts in a task, when it was given

    def payload(self) -> dict[str, Any]:
        body = asdict(self)
        for key in ("random_seeds", "comparators", "controls", "criteria"):
            body[key] = list(getattr(self, key))
        return body

    def digest(self) -> str:
        return plan_hash(self.payload())


@dataclass(frozen=True)
class Registration:
    """What ``check_registration`` found: the label, the plan event (None when exploratory and absent), why."""

    label: str
    plan_event: dict | None
    reason: str = ""


def plan_hash(payload: dict[str, Any]) -> str:
    """SHA-256 of the plan's canonical JSON (sorted keys), without its own ``plan_hash``."""
    body = {k: v for k, v in payload.items() if k != "plan_hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def make_plan(board: str, profile: str, seed_program: str, seed_source: str, generations: int, population: int,
              random_seeds: list[int], structural: bool, split_seed: int, top_k: int, rule: str,
              events: list[dict], round_: int = 1, notes: str = "", author: str = DEFAULT_AUTHOR,
              search_contexts: list[str] | None = None, comparators: tuple[str, ...] | list[str] = DEFAULT_COMPARATORS,
              controls: tuple[str, ...] | list[str] = DEFAULT_CONTROLS, criteria: tuple[Any, ...] = (),
              selection_contexts: list[str] | None = None) -> Plan:
    """The plan, with the round's commitment read from the ledger's ``events`` (None when the round is new), its
    author (the entries claiming it must be theirs), given ``search_contexts``, their ids' SHA-256, its
    ``comparators`` and ``controls`` (``check_comparisons``: none is refused), its pass ``criteria``
    (``plan_criteria.Criterion``s) and, given the selection half's contexts, their fewest per task: a plan of a
    measuring profile with fewer than ``selection.MIN_PER_TASK`` is refused (``selection.SelectionTooSmall``)."""
    from . import selection

    comparators, controls = check_comparisons(comparators, controls)
    per_task = None if selection_contexts is None else selection.check_selection_half(selection_contexts, profile)
    from ..arena.scoring.plan_looks import SEED_LIMIT, code_digest, shape_digest
    from ..arena.scoring.rounds import round_event
    from ..arena.submissions.identity import author_key

    if not random_seeds or len(set(random_seeds)) != len(random_seeds):
        raise ValueError(f"give distinct random seeds, got {random_seeds}")
    if any(isinstance(s, bool) or not 0 <= int(s) < SEED_LIMIT for s in random_seeds):
        raise ValueError(f"random seeds must be 0 <= s < 2**31, got {random_seeds}")
    if not author_key(author):
        raise ValueError("a plan needs an author (the entries claiming it must be theirs)")
    committed = round_event(events, round_)
    return Plan(board, profile, seed_program, hashlib.sha256(seed_source.encode()).hexdigest(), int(generations),
                int(population), tuple(int(s) for s in random_seeds), bool(structural), int(split_seed), int(top_k),
                rule, int(round_), str(committed["commitment"]) if committed else None, notes, {}, author,
                author_key(author), None if search_contexts is None else contexts_sha256(search_contexts),
                code_digest(seed_source.encode()), shape_digest(seed_source.encode()), comparators, controls,
                tuple(c.payload() if hasattr(c, "payload") else dict(c) for c in criteria), per_task)


def contexts_sha256(context_ids: list[str]) -> str:
    """SHA-256 of a set of context ids (sorted, one per line): the search half a plan fixes."""
    return hashlib.sha256("\n".join(sorted(set(map(str, context_ids)))).encode()).hexdigest()


def record_plan(ledger: Any, plan: Plan, reserve: bool = False) -> dict:
    """Append the ``plan`` event (``Ledger.append``); returns the event as written. A plan without comparators is
    refused (``MissingComparators``) before anything is written; with ``reserve``, so is a plan whose author
    lacks the rate limit's room for one entry per seed now (``plan_quota.NoRoomForPlan``)."""
    check_comparisons(plan.comparators, plan.controls)
    if reserve:
        from .plan_quota import check_room

        check_room(ledger, plan.author, len(plan.random_seeds))
    return ledger.append("plan", {**plan.payload(), "plan_hash": plan.digest()})


def plan_ref(event: dict) -> dict[str, Any]:
    return {"event_hash": event["hash"], "seq": event["seq"], "time": event["time"],
            "plan_hash": event["payload"]["plan_hash"]}


def write_plan_ref(run_folder: str | Path, event: dict) -> Path:
    """``<run>/plan.json``: which ledger event holds this run's plan."""
    path = Path(run_folder) / PLAN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan_ref(event), indent=1) + "\n")
    return path


def now() -> str:
    return datetime.now(UTC).isoformat()


def _time(value: str) -> datetime:
    t = datetime.fromisoformat(value)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _read_ref(run_folder: Path) -> dict:
    try:
        ref = json.loads((run_folder / PLAN_FILE).read_text())
    except (OSError, ValueError):
        raise NotPreregistered(f"the run {run_folder.name} has no readable {PLAN_FILE}: it was not started with "
                               "`cachecraft arena search --preregister`") from None
    if not isinstance(ref, dict) or not isinstance(ref.get("event_hash"), str):
        raise NotPreregistered(f"{PLAN_FILE} of the run {run_folder.name} names no ledger event")
    return ref


def _matches_run(plan: dict, info: dict[str, str]) -> list[str]:
    """What in the run's ``run_info.txt`` differs from its plan."""
    wanted = {"board": plan.get("board"), "seed": plan.get("seed_program"),
              "generations": plan.get("generations"), "population": plan.get("population")}
    bad = [f"{k} (run {info.get(k)!r}, plan {v!r})" for k, v in wanted.items() if str(info.get(k)) != str(v)]
    if info.get("random_seed") not in {str(s) for s in plan.get("random_seeds") or []}:
        bad.append(f"random seed {info.get('random_seed')!r} (the plan's: {plan.get('random_seeds')})")
    structural = str(info.get("mutator", "")).endswith(STRUCTURAL_TAG)
    if not info.get("mutator"):
        bad.append("the run does not record its mutator (run_info.txt: mutator=)")
    elif "structural" in plan and structural != bool(plan["structural"]):
        bad.append(f"structural operators {'on' if structural else 'off'} (the plan: {plan['structural']})")
    return bad


def _contexts_differ(plan: dict, run: Path) -> list[str]:
    """The run's search-half contexts against the plan's ``search_contexts_sha256`` (when the plan fixed them)."""
    wanted = plan.get("search_contexts_sha256")
    if not wanted:
        return []
    try:
        found = contexts_sha256((run / CONTEXTS_FILE).read_text().split())
    except OSError:
        return [f"the run has no {CONTEXTS_FILE} to compare with the plan's search contexts"]
    return [] if found == wanted else [f"its search contexts ({CONTEXTS_FILE}) are not the plan's"]


def check_registration(events: list[dict], run_folder: str | Path, run_id: str | None = None,
                       exploratory: bool = False) -> Registration:
    """The run's pre-registration against the (verified) ledger ``events``; ``NotPreregistered`` when it fails
    and ``exploratory`` is False."""
    try:
        return Registration(PREREGISTERED, _registered(events, Path(run_folder), run_id))
    except NotPreregistered as err:
        if not exploratory:
            raise
        return Registration(EXPLORATORY, None, str(err))


def _registered(events: list[dict], run: Path, run_id: str | None) -> dict:
    from .runlog import load_run

    ref = _read_ref(run)
    found = [e for e in events if e.get("hash") == ref["event_hash"]]
    if not found or found[0].get("kind") != "plan":
        raise NotPreregistered(f"no plan event {ref['event_hash'][:16]}... in this arena's ledger: record the plan "
                               "with `arena search --preregister` in the arena you submit to")
    event = found[0]
    plan = event.get("payload", {})
    if plan_hash(plan) != plan.get("plan_hash"):
        raise NotPreregistered("the plan event's content does not match its plan hash")
    info = load_run(run).info
    bad = _matches_run(plan, info) + _contexts_differ(plan, run)
    if bad:
        raise NotPreregistered("the run differs from its plan: " + "; ".join(bad))
    started = info.get("started")
    if not started:
        raise NotPreregistered(f"the run {run.name} does not record when it started (run_info.txt: started=)")
    broken = round_claim_broken(events, event)
    if broken:
        raise NotPreregistered(broken)
    if _time(event["time"]) > _time(started):
        raise NotPreregistered(f"the plan was recorded at {event['time']}, after the run started at {started}")
    earlier = [e for e in events[: event["seq"]] if run_id and
               (e.get("payload") or {}).get("origin", {}).get("run_id") == run_id]
    if earlier:
        raise NotPreregistered(f"the ledger holds an entry of this run (seq {earlier[0]['seq']}) before its plan")
    return event


# A claim against its run; the ledger-only checks are arena/scoring/claims.py (their count of looks, shared with
# the site, arena/scoring/plan_looks.py)
def verify_claim(events: list[dict], entry: dict, run_folder: str | Path) -> Claim:
    """``claim_verdict``, then the entry against its run folder (module doc): ``verified`` when all agree. The
    folder is the author's to write: a malformed one (bad JSON, a missing file, an empty table) is a failing
    verdict naming what broke, never an exception."""
    claim = claim_verdict(events, entry)
    if not claim.holds:
        return claim
    run = Path(run_folder)
    try:
        broken, notes = _against_run(events, entry, run, claim)
    except Exception as err:  # noqa: BLE001 - the run folder is untrusted input: what breaks reading it fails
        broken, notes = f"its run folder could not be read ({type(err).__name__}: {err})", ""
    if broken:
        return replace(claim, holds=False, reason=f"against its run {run.name}: {broken}")
    return replace(claim, verified=True, reason=notes)


def _against_run(events: list[dict], entry: dict, run: Path, claim: Claim) -> tuple[str, str]:
    """(why the entry disagrees with its run or '', the holding verdict's notes)."""
    from . import selection
    from .candidate_result import candidate_name
    from .submit import converted_method, run_origin

    origin = payload(entry)["origin"]
    try:
        ran = run_origin(run)
        reg = check_registration(events, run, ran["run_id"])
    except (NotPreregistered, OSError, ValueError) as err:
        return str(err), ""
    if reg.plan_event["payload"]["plan_hash"] != claim.plan_hash:
        return "the run was registered under another plan", ""
    broken = _origin_differs(events, entry, origin, ran)
    if broken:
        return broken, ""
    broken = selection.selection_broken(run, int(reg.plan_event["payload"].get("top_k") or 1)) \
        or selection.files_disagree(run) or selection.digests_differ(run, origin)
    if broken:
        return broken, ""
    child_id, code, _ = selection.read_selected(run)
    if origin.get("child_id") != child_id:
        return f"the entry names child {origin.get('child_id')!r}, the rule chose {child_id!r}", ""
    if child_id.startswith("cand-") and child_id.split("-g")[0] != candidate_name(code):
        return f"the chosen program's candidate name is {candidate_name(code)}, not {child_id}'s", ""
    if hashlib.sha256(converted_method(code, child_id)).hexdigest() != payload(entry).get("code_sha256"):
        return f"the entry's method.py is not {child_id}'s program converted", ""
    notes = claim.reason.replace(NOT_VERIFIED, f"verified against its run {run.name}")
    if not any(k in origin for k in selection.DIGEST_KEYS) and selection.selection_digests(run):
        notes += ("; its origin carries no selection digests (submitted before they were carried): the run's "
                  "selection files are not bound to the ledger")
    return "", notes


def _origin_differs(events: list[dict], entry: dict, origin: dict, ran: dict) -> str:
    """Why the entry's origin is not its run's (third red team: one seed-0 run entered as seeds 0 and 1), or '':
    the same run id, random seed and seed program as the run records, and no earlier entry naming the run."""
    for key in ("run_id", "random_seed", "seed"):
        if origin.get(key) != ran.get(key):
            return f"the entry's origin says {key} {origin.get(key)!r}, its run's is {ran.get(key)!r}"
    earlier = [e for e in events[: entry.get("seq", len(events))] if e.get("kind") == "submission"
               and isinstance(payload(e).get("origin"), dict) and payload(e)["origin"].get("run_id") == ran["run_id"]]
    if earlier:
        return f"an earlier entry (seq {earlier[0].get('seq')}) names the same run {ran['run_id']!r}: a run is one look"
    return ""
