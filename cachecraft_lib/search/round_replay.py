"""Replaying notebook 08's committed round (issue 58): a rerun with the round's revealed secret and the same plan is
a reproduction of that study, not a new one, so ``make reproduce`` can regenerate its tables byte for byte.

A round's record lives in ``figures/samples``: ``<stem>_ledger.jsonl`` with its ``.pub`` (the signed public ledger:
the plan, then the round's commitment to its secret) and ``<stem>_revealed_secret.txt`` (the secret, published after
the round). ``committed_round`` reads them and checks the secret against the ledger's commitment; ``check_plan``
refuses a replay whose plan is not the committed one (other sizes, seeds, criteria or seed program would make it a
new study on revealed items). Nothing here draws or reads a hidden secret: a revealed one is public.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

# a round's record, never regenerated (the pipeline reads this name without the arena: its imports stay local)
RECORD_SUFFIXES = ("_ledger.jsonl", "_ledger.pub", "_revealed_secret.txt")
MODES = ("auto", "replay", "new")


class ReplayRefused(ValueError):
    """The committed round cannot be replayed as asked (its record is broken, or the plan differs)."""


@dataclass(frozen=True)
class CommittedRound:
    """A revealed round as committed: its secret (checked against the ledger), its plan, its commitment."""

    stem: str
    secret: bytes
    plan: dict  # the plan event's payload, as the signed ledger holds it
    commitment: str
    events: list[dict]  # the whole signed ledger: the entries a replay must match
    round: int = 1


def record_files(samples: Path, stem: str) -> list[Path]:
    """The round's record: ledger, public key, revealed secret (in that order)."""
    return [Path(samples) / f"{stem}{suffix}" for suffix in RECORD_SUFFIXES]


def committed_round(samples: Path, stem: str, round_: int = 1) -> CommittedRound | None:
    """The revealed round ``stem`` in ``samples``; ``None`` when no revealed secret is committed for it. Raises
    ``ReplayRefused`` when the record is there but broken (a ledger whose signatures fail, a secret that does not
    match the round's commitment, no plan before the round)."""
    from ..arena.boards import splits
    from ..arena.scoring.ledger import Ledger

    ledger_file, public_file, secret_file = record_files(samples, stem)
    if not secret_file.is_file():
        return None
    if not ledger_file.is_file() or not public_file.is_file():
        raise ReplayRefused(f"{secret_file.name} is committed without its ledger ({ledger_file.name}, "
                            f"{public_file.name}): restore them from git, or run a new study (ROUND='new')")
    with tempfile.TemporaryDirectory(prefix="cachecraft-round-") as folder:  # Ledger reads <folder>/ledger.pub
        shutil.copyfile(ledger_file, Path(folder) / "ledger.jsonl")
        shutil.copyfile(public_file, Path(folder) / "ledger.pub")
        try:
            events = Ledger(Path(folder) / "ledger.jsonl").events()
        except Exception as e:  # tampered lines, a swapped key: the record proves nothing
            raise ReplayRefused(f"{ledger_file.name} does not verify against {public_file.name} ({e}): "
                                "restore the committed files, or run a new study (ROUND='new')") from e
    rounds = [e for e in events if e["kind"] == "round" and e["payload"].get("round") == round_]
    plans = [e for e in events if e["kind"] == "plan"]
    if len(rounds) != 1 or not plans or plans[0]["seq"] > rounds[0]["seq"]:
        raise ReplayRefused(f"{ledger_file.name} does not hold one plan followed by round {round_}'s commitment")
    secret = secret_file.read_text().strip().encode()
    event = rounds[0]["payload"]
    if not splits.verify_reveal(secret, round_, event["commitment"], event["salt"]):
        raise ReplayRefused(f"{secret_file.name} does not match round {round_}'s commitment in {ledger_file.name}: "
                            "it is not this round's secret")
    return CommittedRound(stem, secret, plans[0]["payload"], event["commitment"], events, round_)


def resolve_mode(requested: str, committed: CommittedRound | None, sizes_given: bool) -> str:
    """``replay`` or ``new``. ``auto`` replays the committed round when there is one, and is a new study where there
    is none; ``replay`` insists; ``new`` always draws a fresh secret (and replaces the committed round's record).
    Sizes given beside a committed round are refused unless ``new`` is asked for: a new study there overwrites the
    committed record, which nobody should do by accident."""
    if requested not in MODES:
        raise ValueError(f"ROUND must be one of {', '.join(MODES)}, not {requested!r}")
    if requested == "new" or (requested == "auto" and committed is None):
        return "new"
    if committed is None:
        raise ReplayRefused("ROUND='replay', but no revealed round is committed for this board and profile "
                            "(<stem>_revealed_secret.txt with its ledger): run a new study (ROUND='new')")
    if sizes_given:
        raise ReplayRefused(f"sizes were given, but {committed.stem}'s committed round is replayed with its own: "
                            "drop the sizes to replay it, or pass ROUND='new' to replace it with a new study")
    return "replay"


def check_fresh_arena(events: list[dict]) -> None:
    """A replay commits a public secret as its arena's round: only in an arena of its own (an empty ledger), never
    in one whose round a real study still needs (``ROOT`` pointing at an organiser's arena)."""
    if events:
        raise ReplayRefused(f"a replay needs an arena of its own, but this one's ledger has {len(events)} event(s): "
                            "leave ROOT unset (a fresh arena in a temporary folder)")


def committed_entries(committed: CommittedRound, board: str) -> dict[int, dict]:
    """Each pre-registered search entry of the round on ``board``, by its random seed: the signed payload."""
    return {int(e["payload"]["origin"]["random_seed"]): e["payload"] for e in committed.events
            if e["kind"] == "submission" and e["payload"].get("board") == board
            and (e["payload"].get("origin") or {}).get("child_id")}


def check_chosen(committed: CommittedRound, board: str, chosen: dict[int, tuple[str, str]], folder: Path) -> None:
    """Before any test item is read: each seed's chosen child (id, code) must be the one the round submitted, its
    converted ``method.py`` hashing to the ledger's ``code_sha256``; else the replay is another study."""
    from ..arena.submissions.folder import load_submission
    from ..arena.submissions.from_program import program_to_submission
    from .submit import child_program_name

    entries = committed_entries(committed, board)
    if sorted(entries) != sorted(chosen):
        raise ReplayRefused(f"the round submitted seeds {sorted(entries)}, this run chose for {sorted(chosen)}")
    for seed, (child_id, code) in sorted(chosen.items()):
        entry = entries[seed]
        program = Path(folder) / f"seed{seed}" / child_program_name(child_id)
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text(code)
        sha = load_submission(program_to_submission(program, program.parent / entry["name"], entry["name"],
                                                    boards=(board,)).folder).code_sha256
        if child_id != entry["origin"]["child_id"] or sha != entry["code_sha256"]:
            raise ReplayRefused(f"seed {seed}: this run chose {child_id} ({sha[:12]}), the round submitted "
                                f"{entry['origin']['child_id']} ({entry['code_sha256'][:12]}): the search no longer "
                                "reproduces the round (code changed since?); nothing was scored on test items")


SCORE_FIELDS = ("overall", "lo", "hi", "accuracy", "units")


def check_scores(committed: CommittedRound, events: list[dict]) -> None:
    """After scoring, before any table: every submission and baseline the round recorded must score as recorded (the
    same name on the same board), field for field; else the tables would not be the committed round's."""
    def scores(evs: list[dict]) -> dict[tuple[str, str], dict]:
        return {(e["payload"]["board"], e["payload"]["name"]): {k: e["payload"].get(k) for k in SCORE_FIELDS}
                for e in evs if e["kind"] in ("submission", "baseline") and not e["payload"].get("rejected")}

    recorded, replayed = scores(committed.events), scores(events)
    differ = {key: (recorded[key], replayed.get(key)) for key in recorded if recorded[key] != replayed.get(key)}
    if differ:
        key, (was, now) = next(iter(differ.items()))
        raise ReplayRefused(f"{len(differ)} submission(s) do not score as the round recorded, e.g. {key[1]} on "
                            f"{key[0]}: {was} recorded, {now} now; the replay's tables would not be the round's")


def plan_differences(committed: dict, plan: dict) -> list[str]:
    """The plan fields (``plan_hash`` aside) whose values differ between the committed plan and this run's."""
    keys = (set(committed) | set(plan)) - {"plan_hash"}
    return sorted(k for k in keys if committed.get(k) != plan.get(k))


def check_plan(committed: CommittedRound, plan: dict) -> None:
    """``ReplayRefused`` unless this run's plan is the committed one, field for field (so its hash is too)."""
    differ = plan_differences(committed.plan, plan)
    if differ or committed.plan.get("plan_hash") != plan.get("plan_hash"):
        fields = ", ".join(differ) or "its hash"
        raise ReplayRefused(f"this run's plan differs from {committed.stem}'s committed plan in {fields}: "
                            "a replay must be the same study (same sizes, seeds, criteria, seed program and "
                            "rules); run a new study instead (ROUND='new')")
