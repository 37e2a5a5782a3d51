"""A search run's best program submitted to the arena like anyone's entry (``cachecraft arena submit-search``).

The run's best program becomes a submission folder (``arena.submissions.from_program.program_to_submission``); it is scored on
the board's dev items (``Arena.dev``, the same call as ``arena dev``); its DESCRIPTION.md is then rewritten
from facts only: the lineage of edits that led to it (from the run's trace), the dev report's numbers, the
rule judge's nearest prior art and its token similarity, and the limitations. ``metadata.yaml`` carries the
run's origin (run id, seed, random seed, iterations, mutator), which ``Arena.submit`` records in the ledger
beside the entry. The submission then goes through ``Arena.submit`` (hidden test items, the gate, points)
and the rule judge reviews it (recorded in the ledger). The search itself never sees the test items: only
this step, run by the organiser's secret holder, does.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from ..arena.submissions.folder import DESCRIPTION_FILE, METADATA_FILE
from ..arena.submissions.from_program import find_program, program_to_submission
from .run_picks import best_id, top_children  # noqa: F401 (top_children: re-exported for the CLI)
from .runlog import best_child, lineage, load_run

LINEAGE_SHOWN = 12  # edits listed in DESCRIPTION.md (the oldest elided beyond it)


@dataclass
class SearchSubmission:
    """What ``prepare`` wrote: the folder, its origin, the lineage of edits, the dev report and the judge's match."""

    folder: Path
    origin: dict[str, Any]
    edits: list[str]
    dev: dict[str, Any]
    closest: dict[str, Any] | None
    entry: dict[str, Any] | None = None
    review: Any = None
    notes: list[str] = field(default_factory=list)


def run_origin(run_folder: str | Path) -> dict[str, Any]:
    """The run's id (its folder name and a hash of its run_info.txt), seed, random seed, iterations, mutator."""
    run = load_run(run_folder)
    info = run.info
    digest = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    seed = Path(info.get("seed", "?")).stem
    return {"kind": "search", "run_id": f"{Path(run_folder).name}-{digest}", "seed": seed,
            "random_seed": int(info.get("random_seed", -1)), "iterations": int(info.get("iterations", -1)),
            "mutator": info.get("mutator", "?")}


def child_program_name(child_id: str) -> str:
    """The file name a chosen child's code is converted from (``method.py``'s first line names it): from the
    child's id alone, so the entry's method.py can be recomputed from the run (``claims.verify_claim``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(child_id))[:80] + ".py"


def converted_method(code: str, child_id: str) -> bytes:
    """The ``method.py`` bytes ``prepare`` submits for a child's ``code`` (their SHA-256 is the entry's
    ``code_sha256``)."""
    with tempfile.TemporaryDirectory(prefix="cachecraft-convert-") as tmp:
        program = Path(tmp) / child_program_name(child_id)
        program.write_text(code)
        return program_to_submission(program, Path(tmp) / "folder", "converted", boards=("A",)).code


def edit_lineage(run_folder: str | Path, child_id: str | None = None) -> list[str]:
    """The mutator's stated change at each step from the seed to ``child_id`` (default: the run's best program),
    oldest first; empty when that program is the seed itself."""
    trace = load_run(run_folder).trace
    if trace.empty:
        return []
    target = child_id or best_id(run_folder) or str(best_child(trace).child_id)
    by_id = trace.drop_duplicates("child_id").set_index("child_id")
    return [str(by_id.loc[i, "change"]) or "(no stated change)" for i in lineage(trace, target) if i in by_id.index]


def _closest(folder: Path) -> dict[str, Any] | None:
    """The rule judge's nearest known code (``judges.rules.closest``), without running the method."""
    from ..arena.judges import load_bundle
    from ..arena.judges.rules import closest

    others, _ = closest(load_bundle(folder))
    if not others:
        return None
    top = others[0]
    return {"name": top.reference.name, "method": top.reference.method, "author": top.reference.author,
            "similarity": round(float(top.similarity), 3), "copy": bool(top.copy)}


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def _registration_text(origin: dict) -> str:
    if origin.get("registration") == "preregistered":
        return (" Pre-registered: the run's plan (board, seed program, sizes, random seeds, the rule that chose this "
                f"program) was recorded in the arena's ledger before the run started (plan {origin.get('plan')}).")
    if origin.get("registration") == "exploratory":
        return " EXPLORATORY: the run was not pre-registered, so its test number is no confirmatory evidence."
    return ""


def _choice_text(origin: dict) -> str:
    if origin.get("child_id") and "rank" not in origin:
        return (" It was chosen on the selection half of the dev contexts, which the search never scored, among "
                "the run's best programs by the search half's fitness.")
    return ""


def description(name: str, origin: dict, edits: list[str], dev_json: dict, closest: dict | None) -> str:
    """DESCRIPTION.md from facts: the origin, the lineage, the dev report's numbers, the nearest prior art."""
    mine = dev_json["scores"][dev_json["method"]]
    gain = dev_json.get("gain")
    shown = edits[-LINEAGE_SHOWN:]
    steps = "".join(f"{i}. {e}\n" for i, e in enumerate(shown, start=len(edits) - len(shown) + 1))
    near = (f"The rule judge's nearest known code is {closest['name']} ({closest['method']}, by "
            f"{closest['author']}), at token similarity {_fmt(closest['similarity'])}."
            if closest else "The rule judge found no known code to compare it with.")
    evidence = (f"On the dev items of board {dev_json['board']} the arena measured overall {_fmt(mine['overall'])}, "
                f"accuracy {_fmt(mine['accuracy'])} and memory {_fmt(mine['memory'])}.")
    if gain:
        evidence += (f" Its gain over {gain['over']} is {gain['point']:+.3f}, with a 95% paired interval from "
                     f"{gain['lo']:+.3f} to {gain['hi']:+.3f} over dev contexts.")
    evidence += f" Measured with: {dev_json['label'] or 'a model the report does not name'}."
    return f"""# {name}

## Idea
A KV-eviction policy program found by CacheCraft's program search (run {origin['run_id']}: seed {origin['seed']},
random seed {origin['random_seed']}, {origin['iterations']} iterations, mutator {origin['mutator']}), submitted as
the search left it. Nothing in it was written by hand.{_registration_text(origin)}{_choice_text(origin)}

## Method
The program scores every cached token from CacheCraft's 17 per-token features (tail attention of the last
queries, densities, head statistics, key and value norms, positions), rebuilt in numpy inside the sandbox, and
keeps the best tokens within the budget for every KV head of a layer. The edits that led to it from the seed,
oldest first ({len(edits)} in all{', the last ' + str(len(shown)) + ' shown' if len(shown) < len(edits) else ''}):

{steps or '(the seed itself: no edit was kept)'}
## Relation to prior work
{near} Its features include SnapKV's window attention and H2O-like accumulated attention, combined with
weights the search chose; FRC (the CacheCraft paper's policy) belongs to the same feature family.

## Evidence
{evidence}

## Limitations
Selected by the search on its fitness items (its own RULER samples, or this board's dev items when
it ran with a board's fitness; then the dev numbers above are biased upward by that selection): only the
hidden test items check it. Whole-chunk selection keeps as many chunks as fit the budget. The
search ran on a small model; a larger one may rank programs differently.

## Builds on
CacheCraft's policy interface and feature builder, the seed program {origin['seed']}, and the features of
SnapKV and H2O that it weighs.
"""


def prepare(run_folder: str | Path, out_dir: str | Path, board: str, arena: Any,
            name: str | None = None, author: str = "cachecraft-search",
            child: tuple[str, str] | None = None, rank: int | None = None,
            registration: Any = None) -> SearchSubmission:
    """Write the submission folder of ``run_folder``'s best program (or of ``child``, a (child id, code) pair of
    ``top_children`` or the run's selection-half choice, ``rank`` its place in the top K, both recorded in the
    origin) for ``board``, scored on its dev items. ``registration`` (``preregister.Registration``): the origin
    records it (``preregistered`` with the plan's hash, or ``exploratory``) and DESCRIPTION.md says it."""
    from ..arena.board_runner import submission_contender
    from ..arena.judges.bundle import dev_report_json
    from ..arena.submissions.folder import load_submission

    origin = run_origin(run_folder)
    if child is not None:
        origin = {**origin, "child_id": child[0], **({"rank": int(rank)} if rank else {})}
    if registration is not None:
        origin["registration"] = registration.label
        if registration.plan_event is not None:  # the full hash names it; the 16 digits are for reading
            origin["plan"] = str(registration.plan_event["payload"]["plan_hash"])[:16]
            origin["plan_hash"] = str(registration.plan_event["payload"]["plan_hash"])
    name = name or f"search-{origin['seed']}-{origin['random_seed']}"
    out = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="cachecraft-child-") as tmp:
        program = find_program(run_folder)
        if child is not None:  # named by its id alone: converted_method recomputes the same method.py
            program = Path(tmp) / child_program_name(child[0])
            program.write_text(child[1])
        program_to_submission(program, out, name, author=author, boards=(board,))
    meta = yaml.safe_load((out / METADATA_FILE).read_text())
    meta["origin"] = origin
    (out / METADATA_FILE).write_text(yaml.safe_dump(meta, sort_keys=False))
    dev = arena.dev(board, submission_contender(load_submission(out)))
    dev_json = dev_report_json(dev, name, arena.board(board).label)
    closest = _closest(out)
    edits = edit_lineage(run_folder, child[0] if child else None)
    (out / DESCRIPTION_FILE).write_text(description(name, origin, edits, dev_json, closest))
    load_submission(out)  # the final folder still passes `arena check`
    prepared = SearchSubmission(out, origin, edits, dev_json, closest)
    carry_selection(prepared, run_folder)
    return prepared


def carry_selection(prepared: SearchSubmission, run_folder: str | Path) -> dict[str, str]:
    """When the prepared entry is the run's selection (``selected/``, not a ``--top`` rank), carry
    ``selected.json``'s digests (``selection.selection_digests``) into its metadata origin, whoever prepares it
    (``submit-search``, notebook 08): the ledger then holds them and ``verify_claim`` compares the run folder with
    them (a selection file changed after the entry fails). Returns what was carried."""
    from .selection import read_selected, selection_digests

    chosen = read_selected(run_folder)
    if chosen is None or prepared.origin.get("child_id") != chosen[0] or "rank" in prepared.origin:
        return {}
    digests = selection_digests(run_folder)
    path = Path(prepared.folder) / METADATA_FILE
    meta = yaml.safe_load(path.read_text())
    meta["origin"] = {**(meta.get("origin") or {}), **digests}
    path.write_text(yaml.safe_dump(meta, sort_keys=False))
    prepared.origin.update(digests)
    return digests


def submit(prepared: SearchSubmission, board: str, arena: Any, secret: bytes, round_: int = 1,
           judge: bool = True, **limits: Any) -> SearchSubmission:
    """``Arena.submit`` the prepared folder (the ledger records its origin), then the rule judge's review."""
    prepared.entry = arena.submit(prepared.folder, board, secret, round_, **limits)
    if judge and not prepared.entry.get("rejected"):
        from ..arena.judges import load_bundle, review
        from ..arena.judges.record import record_review

        events = arena.ledger.events()
        bundle = load_bundle(prepared.folder, prepared.dev, events=events, arena_root=arena.root)
        prepared.review = review(bundle)
        record_review(arena.ledger, prepared.review, bundle, board)
    return prepared


CONTROL_AUTHOR = "control"  # the test looks of the plan's controls (the seed program, random search's picks)


def score_controls(arena: Any, board: str, secret: bytes, programs: dict[str, str], round_: int = 1,
                   **limits: Any) -> pd.DataFrame:
    """The plan's controls (``programs``: name -> policy program code) on the round's hidden test items, the
    same items and scoring as every entry (``score.unit_values``), one ``test_look`` each in the ledger (author
    ``control``). Not entries: they move no board and spend no author's rate limit; they exist to be compared
    with. Returns the per-unit rows (``method`` = the name, ``context_id``, ``task``, ``overall``...)."""
    from ..arena.board_runner import submission_contender
    from ..arena.scoring import score

    the_board = arena.board(board)
    with tempfile.TemporaryDirectory(prefix="cachecraft-controls-") as tmp:
        subs = []
        for name, code in programs.items():
            program = Path(tmp) / f"{name}.py"
            program.write_text(code)
            subs.append(program_to_submission(program, Path(tmp) / name, name, author=CONTROL_AUTHOR, boards=(board,)))
        looks = [{"author": CONTROL_AUTHOR, "author_key": CONTROL_AUTHOR, "name": s.name, "program": s.code_sha256}
                 for s in subs]
        rows = arena.run_test(the_board, secret, round_, [submission_contender(s, **limits) for s in subs], looks)
    units = score.unit_values(rows, the_board)
    return units[units.method.isin(programs)].reset_index(drop=True)
