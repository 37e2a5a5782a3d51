"""The submission chosen on dev items alone, with an honest dev estimate (issue 49, item 2).

Why: a search's best fitness is the maximum over every child it tried on the items it climbed, so it is biased
upward (docs/board_fitness.md: among the best children the two halves of the dev items disagreed on the order).
The dev contexts are therefore split in two by a public seed (``split_dev``: within each task, a seeded shuffle,
alternate contexts to each half), the search's fitness uses only the **search half**, and the program submitted
is the best on the **selection half** among the run's top K by search-half fitness (``select``). Its
selection-half score is the dev estimate reported: the search never saw those contexts. It is still the best of
K on them, so with K > 1 it carries a small winner's-curse of its own; K is small and pre-registered.

``choose`` is the rule, and it reads nothing but the selection-half scores (ties go to the smaller program
digest, never to search order), so a program best on the search half and worst on the selection half is not
chosen (tested).

``select`` also writes every shortlisted child's per-unit selection-half values (``selected/selection_units.csv``:
child_id, context_id, task, overall, random_seed), so a reader recomputes each ``selection_fitness`` as
``unit_means`` (the mean over tasks of the task means, ``score.method_scores``'s overall) and checks the choice.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

SPLIT_SEED = 4902  # public: anyone regenerates the two halves of a board's dev contexts from it
TOP_K = 4
RULE = ("dev contexts split in two within each task by a seeded shuffle (split seed {split_seed}); the search's "
        "fitness uses the search half only; the submission is the best on the selection half among the run's top "
        "{top_k} distinct valid programs by search-half fitness (ties: the smaller program digest)")
SELECTED = "selected"  # the run folder's sub-folder holding the choice
UNITS_FILE = "selection_units.csv"  # per-unit selection-half values of every shortlisted child
UNIT_COLUMNS = ["child_id", "context_id", "task", "overall", "random_seed"]
DIGEST_KEYS = ("shortlist_sha256", "selection_units_sha256")  # selected.json's digests, carried into the origin
MIN_PER_TASK = 4  # issue 56: a selection half with fewer contexts per task ties its shortlists and decides little
MEASURING = ("cpu", "gpu", "paper")  # the profiles whose plans are evidence (smoke and the gpu stand-in are not)


class SelectionTooSmall(ValueError):
    """A measuring profile's plan whose selection half has fewer than ``MIN_PER_TASK`` contexts in some task."""


@dataclass(frozen=True)
class DevHalves:
    """A board's dev contexts in two disjoint halves, and the public seed that drew them."""

    search: tuple[str, ...]
    selection: tuple[str, ...]
    seed: int


@dataclass
class Selected:
    """The chosen program, its selection-half fitness (the dev estimate) and the shortlist it was chosen from."""

    child_id: str
    code: str
    estimate: float
    shortlist: pd.DataFrame  # child_id, search_fitness (shown, not used), selection_fitness, chosen
    report: dict | None = None
    units: pd.DataFrame | None = None  # UNIT_COLUMNS: each shortlisted child's selection-half values per context


def rule_text(split_seed: int = SPLIT_SEED, top_k: int = TOP_K) -> str:
    return RULE.format(split_seed=split_seed, top_k=top_k)


def split_dev(items: pd.DataFrame, seed: int = SPLIT_SEED) -> DevHalves:
    """Each task's dev contexts shuffled by ``Random(f"{seed}|{task}")``, then alternately search, selection
    (so both halves hold every task with at least one context; an odd count gives the search one more)."""
    search: list[str] = []
    selection: list[str] = []
    for task, ids in items.groupby("task", sort=True).context_id:
        ordered = sorted(dict.fromkeys(ids))
        if len(ordered) < 2:
            raise ValueError(f"task {task} has {len(ordered)} dev context(s): two are needed to split them")
        random.Random(f"{seed}|{task}").shuffle(ordered)
        search += ordered[0::2]
        selection += ordered[1::2]
    return DevHalves(tuple(search), tuple(selection), seed)


def per_task(contexts: list[str] | tuple[str, ...]) -> dict[str, int]:
    """How many of ``contexts`` (ids ``<length>/<task>/<i>``) each task has."""
    return pd.Series([str(c).split("/")[1] for c in contexts], dtype=object).value_counts().to_dict()


def check_selection_half(contexts: list[str] | tuple[str, ...], profile: str) -> int:
    """The selection half's fewest contexts in a task; ``SelectionTooSmall`` when that is below ``MIN_PER_TASK``
    on a measuring profile (``MEASURING``; the gpu stand-in runs at smoke sizes and is exempt, as smoke is)."""
    from ..profiles import gpu_standin

    counts = per_task(contexts)
    fewest = min(counts.values()) if counts else 0
    if profile in MEASURING and not (profile == "gpu" and gpu_standin()) and fewest < MIN_PER_TASK:
        thin = sorted(t for t, n in counts.items() if n < MIN_PER_TASK)
        raise SelectionTooSmall(
            f"the {profile} plan's selection half has {fewest} context(s) in a task ({', '.join(thin) or 'none'}); "
            f"at least {MIN_PER_TASK} per task are needed (issue 56: fewer tie the shortlists): raise the board's "
            "dev items per task to twice that")
    return fewest


def dev_context_ids(board: Any) -> pd.DataFrame:
    """A board's dev contexts (task, context_id) from its public settings alone, without a model or any item
    drawn: ``items.board_items`` names them ``<length>/<task>/<i>``, i below the board's dev items per task
    (offline RULER generates exactly that many; from the hub, a task with fewer rows in its dev half has fewer).
    ``split_dev`` of these is what a run's ``fitness_contexts.txt`` (search half) and ``selection_units.csv``
    (selection half) hold, so a reader checks both without running anything."""
    return pd.DataFrame([{"task": t, "context_id": f"{length}/{t}/{i}"} for length in board.lengths
                         for t in board.tasks for i in range(board.items["dev"])], columns=["task", "context_id"])


def choose(candidates: list[tuple[str, str]], selection_scores: Mapping[str, float | None]) -> str:
    """The rule: the child id with the highest selection-half score among ``candidates`` ((child id, code)
    pairs); ties to the smaller digest of the code. Search-half scores are not an input."""
    from .board_fitness import candidate_name

    scored = [(float(selection_scores[c]), c, code) for c, code in candidates if selection_scores.get(c) is not None]
    if not scored:
        raise ValueError("no candidate has a selection-half score: none passed its cascade")
    best = max(s for s, _, _ in scored)
    return min((candidate_name(code), c) for s, c, code in scored if s == best)[1]


def select(run_folder: str | Path, selection_fitness: Any, top_k: int = TOP_K) -> Selected:
    """Score the run's top ``top_k`` (by search-half fitness) on the selection half (``selection_fitness``: a
    ``BoardFitness`` on those contexts with gate 0) and choose by ``choose``; written to ``<run>/selected/``."""
    from .run_picks import top_children
    from .threads import THREADS, torch_threads

    picks = top_children(run_folder, top_k)
    with torch_threads(THREADS):  # as the search screens: the same answers, without two threads' spin-waits
        results = selection_fitness.evaluate([code for _, code in picks])
    scores = {c: r.fitness for (c, _), r in zip(picks, results, strict=True)}
    chosen = choose(picks, scores)
    code = dict(picks)[chosen]
    search_fit = _search_fitness(run_folder)
    table = pd.DataFrame([{"child_id": c, "search_fitness": search_fit.get(c), "selection_fitness": scores[c],
                           "chosen": c == chosen} for c, _ in picks])
    report = next(r.report for (c, _), r in zip(picks, results, strict=True) if c == chosen)
    units = shortlist_units(picks, results, _random_seed(run_folder))
    out = Selected(chosen, code, float(scores[chosen]), table, report, units)
    write_selected(run_folder, out)
    return out


def shortlist_units(picks: list[tuple[str, str]], results: list[Any], random_seed: int | None) -> pd.DataFrame:
    """Each pick's per-unit selection-half values from its result's dev report (``report["units"]``, the rows of
    ``score.unit_values`` under the candidate's name); a pick stopped before stage 2 has none."""
    parts = []
    for (child_id, _), result in zip(picks, results, strict=True):
        report = getattr(result, "report", None)
        if not report or report.get("units") is None:
            continue
        mine = report["units"][report["units"].method == result.name]
        parts.append(mine[["context_id", "task", "overall"]].assign(child_id=child_id, random_seed=random_seed))
    if not parts:
        return pd.DataFrame(columns=UNIT_COLUMNS)
    return pd.concat(parts, ignore_index=True)[UNIT_COLUMNS]


def unit_means(units: pd.DataFrame) -> pd.Series:
    """Per (random_seed, child_id): the mean over tasks of the task means of ``overall``, the way
    ``score.method_scores`` (hence ``selection_fitness``) averages a method's units."""
    by_task = units.groupby(["random_seed", "child_id", "task"], dropna=False).overall.mean()
    return by_task.groupby(["random_seed", "child_id"], dropna=False).mean()


def units_disagree(shortlist: pd.DataFrame, units: pd.DataFrame, tol: float = 1e-12) -> list[str]:
    """The shortlist rows (random_seed, child_id, selection_fitness) whose ``unit_means`` of ``units`` differ by
    more than ``tol`` or are missing, as "seed/child" strings; empty when the per-unit file reproduces them all."""
    means = unit_means(units)
    bad = []
    for seed, child, value in zip(shortlist.random_seed, shortlist.child_id, shortlist.selection_fitness, strict=True):
        mean = means.get((seed, child))
        if pd.isna(value) != (mean is None) or (mean is not None and abs(float(mean) - float(value)) > tol):
            bad.append(f"{seed}/{child}")
    return bad


def _random_seed(run_folder: str | Path) -> int | None:
    from .runlog import load_run

    value = load_run(run_folder).info.get("random_seed")
    return None if value is None else int(value)


def _search_fitness(run_folder: str | Path) -> dict[str, float]:
    from .runlog import load_run

    trace = load_run(run_folder).trace
    return {} if trace.empty else dict(zip(trace.child_id.astype(str), trace.fitness.astype(float), strict=True))


def write_selected(run_folder: str | Path, selected: Selected) -> Path:
    """``<run>/selected/``: ``program.py``, ``shortlist.csv``, ``selected.json`` (id and estimate) and, when
    known, ``selection_units.csv`` (``UNITS_FILE``). ``selected.json`` also holds the SHA-256 of the shortlist
    and per-unit files as written (``shortlist_sha256``, ``selection_units_sha256``): carried into a
    submission's origin, they bind the per-unit values to the ledger, where a value changed inside a task
    (its mean kept) would otherwise go unseen."""
    folder = Path(run_folder) / SELECTED
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.py").write_text(selected.code)
    selected.shortlist.to_csv(folder / "shortlist.csv", index=False)
    report = selected.report or {}
    info: dict[str, Any] = {"child_id": selected.child_id, "selection_fitness": selected.estimate,
                            "shortlist_sha256": _sha256(folder / "shortlist.csv")}
    if selected.units is not None:
        selected.units.to_csv(folder / UNITS_FILE, index=False)
        info["selection_units_sha256"] = _sha256(folder / UNITS_FILE)
    if report.get("gain") is not None:
        gain = report["gain"]
        info["selection_gain"] = {"over": report.get("best_baseline"), "point": gain.point, "lo": gain.lo,
                                  "hi": gain.hi}
    (folder / "selected.json").write_text(json.dumps(info, indent=1, default=float) + "\n")
    return folder


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_selected(run_folder: str | Path) -> tuple[str, str, dict] | None:
    """(child id, code, info) of the run's selection, or None when it has none."""
    folder = Path(run_folder) / SELECTED
    if not (folder / "selected.json").is_file():
        return None
    info = json.loads((folder / "selected.json").read_text())
    return str(info["child_id"]), (folder / "program.py").read_text(), info


def selection_digests(run_folder: str | Path) -> dict[str, str]:
    """The digests ``selected.json`` records (``DIGEST_KEYS``; {} without a selection): ``submit-search``
    carries them into the entry's origin, so the ledger binds the selection files as they were at the entry."""
    chosen = read_selected(run_folder)
    return {k: chosen[2][k] for k in DIGEST_KEYS if chosen and isinstance(chosen[2].get(k), str)}


def digests_differ(run_folder: str | Path, origin: dict) -> str:
    """Why the run's ``selected.json`` digests are not those the entry's ``origin`` carried into the ledger, or ''
    (an origin that carries none: ''; ``verify_claim`` notes it)."""
    found = selection_digests(run_folder)
    bad = [k for k in DIGEST_KEYS if k in origin and found.get(k) != origin[k]]
    return (f"selected.json's {', '.join(bad)} differ from the entry's origin in the ledger: the run's selection "
            "files are not those it had when the entry was submitted") if bad else ""


def files_disagree(run_folder: str | Path) -> str:
    """Why the run's selection files do not agree with one another, or '': the digests ``selected.json`` names
    (``write_selected``) must be those of ``shortlist.csv`` and ``selection_units.csv``, and the shortlist's
    selection-half scores the means of the per-unit file. Agreement is all the folder can show: a referee who
    doubts it re-scores the shortlist on the selection half (dev items only, no secret)."""
    folder = Path(run_folder) / SELECTED
    info = json.loads((folder / "selected.json").read_text())
    for key, name in (("shortlist_sha256", "shortlist.csv"), ("selection_units_sha256", UNITS_FILE)):
        if key in info and (not (folder / name).is_file() or _sha256(folder / name) != info[key]):
            return f"selected/{name} is not the file whose digest selected.json records ({key})"
    if not (folder / UNITS_FILE).is_file():
        return ""
    units, shortlist = pd.read_csv(folder / UNITS_FILE), pd.read_csv(folder / "shortlist.csv")
    if units.empty:  # a fitness that gives no per-unit values (tests' stand-ins): nothing to compare
        return ""
    seeds = units.random_seed.dropna().unique()
    shortlist = shortlist.assign(random_seed=seeds[0] if len(seeds) == 1 else None)
    bad = units_disagree(shortlist, units, tol=1e-9)
    return f"the shortlist's selection-half scores are not the means of its per-unit values: {bad}" if bad else ""


def selection_broken(run_folder: str | Path, top_k: int) -> str:
    """Why ``<run>/selected/`` is not what the rule picks from this run, or ''. The shortlist must be the run's top
    ``top_k`` (from its trace), the chosen id the rule's choice on the shortlist's selection-half scores, and the
    program that child's code: a hand-edited choice, or the search half's best, is not the pre-registered pick."""
    from .run_picks import top_children

    chosen = read_selected(run_folder)
    shortlist = Path(run_folder) / SELECTED / "shortlist.csv"
    if chosen is None or not shortlist.is_file():
        return "the run has no selection (selected/): select on the selection half first (`arena search`)"
    picks = top_children(run_folder, top_k)
    table = pd.read_csv(shortlist, dtype={"child_id": str})
    if list(table.child_id) != [c for c, _ in picks]:
        return f"the shortlist is not the run's top {top_k} by search-half fitness"
    scores = {c: (None if pd.isna(s) else float(s)) for c, s in zip(table.child_id, table.selection_fitness, strict=True)}
    if choose(picks, scores) != chosen[0]:
        return f"{chosen[0]} is not the rule's choice on the selection half"
    if dict(picks)[chosen[0]] != chosen[1]:
        return f"selected/program.py is not {chosen[0]}'s code in the run's trace"
    return ""


def half_score(arena: Any, board_name: str, folder: str | Path, contexts: list[str]) -> float:
    """A submission folder's ``arena dev`` overall on a part of the dev items (e.g. FRC's example on the search
    half, the reference line of the search's dynamics figure): the baselines' dev rows and the submission's, both
    restricted to ``contexts``, through ``score.dev_report``. Dev items only."""
    from ..arena.board_runner import submission_contender
    from ..arena.scoring.score import dev_report
    from ..arena.submissions.folder import load_submission

    board = arena.board(board_name)
    keep = set(contexts)
    items = arena.items(board, "dev")
    items = items[items.context_id.isin(keep)].reset_index(drop=True)
    base = arena.dev_baselines(board)
    base = base[base.context_id.isin(keep)].reset_index(drop=True)
    sub = load_submission(folder)
    rows = arena.run(board, items, [submission_contender(sub)])
    return float(dev_report(base, rows, board, sub.name)["scores"].loc[sub.name, "overall"])
