"""Random search at the search's budget: the control that says what selection adds (issue 56, item 1b).

Why: a program search is worth its cost only if it beats sampling the same program space without selection at the
same number of evaluations (the standard control of program search). ``random_search`` draws ``budget`` programs,
each the seed program after a random number (1 to ``max_edits``) of the search's own proposals applied one after
another (``mutator.propose``: the linear-scorer edits and, with ``structural``, the structural operators), with no
score consulted between edits or between programs; it evaluates them on the same dev items as the search (the
fitness it is given: the search half), and writes a run folder in the search's format, so the same selection rule
(``selection.select``: the best on the selection half among the top K by search-half fitness) picks its submission.

Budget: ``budget`` programs scored in full, the search's cost in full evaluations (``search_budget`` reads it from
a finished search run: ``generations x population`` children for the generational engine, fewer full evaluations
than children for successive halving, whose culled children count their share). ``max_edits`` defaults to the
search's generations (a child of generation g is at most g edits from the seed), so both reach the same depth.
Deterministic for a random seed; the draws depend only on (random seed, program index, edit index).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .board_fitness import apply_diff, candidate_name
from .dev_only import dev_fitness, dev_only
from .mutator import OFFLINE_NAME, STRUCTURAL_TAG, propose
from .seeds import seed_path

CONTROL_TAG = "random search (no selection)"  # run_info.txt's control= line
DEFAULT_MAX_EDITS = 8  # the cpu profile's generations in notebook 08


def control_name(seed: str, random_seed: int) -> str:
    """The test-item name of a seed's random-search pick (notebook 08's per-unit file): ``random-<seed>-<s>``."""
    return f"random-{seed}-{random_seed}"


def seed_control_name(seed: str) -> str:
    """The test-item name of the unsearched seed program: ``seed-<seed>``."""
    return f"seed-{seed}"


@dataclass(frozen=True)
class Sampled:
    """One random program: its code and the stated changes from the seed, oldest first."""

    index: int
    code: str
    changes: tuple[str, ...]


def random_program(seed_code: str, rng: random.Random, edits: int, structural: bool = True) -> tuple[str, list[str]]:
    """``edits`` proposals applied one after another to ``seed_code`` (an edit that does not apply is skipped and
    said so): (code, stated changes). Nothing is scored."""
    code, changes = seed_code, []
    for _ in range(edits):
        try:
            diff, change = propose(code, rng, structural)
            code = apply_diff(code, diff)
        except ValueError as err:
            change = f"(no edit: {err})"
        changes.append(change)
    return code, changes


def sample_programs(seed_code: str, budget: int, random_seed: int, max_edits: int = DEFAULT_MAX_EDITS,
                    structural: bool = True) -> Iterator[Sampled]:
    """``budget`` random programs: program i draws its number of edits (1..``max_edits``) and its edits from
    ``Random(f"random:{random_seed}:{i}")`` alone."""
    if budget < 1 or max_edits < 1:
        raise ValueError(f"budget and max_edits must be at least 1, got {budget} and {max_edits}")
    for i in range(budget):
        rng = random.Random(f"random:{random_seed}:{i}")
        code, changes = random_program(seed_code, rng, rng.randint(1, max_edits), structural)
        yield Sampled(i, code, tuple(changes))


def search_budget(run_folder: str | Path) -> int:
    """What a finished search run's children cost, in full evaluations (a program on every context of the
    fitness), rounded to the nearest whole program: the control's budget. From ``generations.csv``'s
    ``evaluations`` (the last row less the first, the seed's) when the run writes it (a child culled early by
    successive halving counts its share), else one per child of its trace (the generational engine's)."""
    from .runlog import load_run

    gens_file = Path(run_folder) / "generations.csv"
    gens = pd.read_csv(gens_file) if gens_file.is_file() else pd.DataFrame()
    if "evaluations" in gens and len(gens):
        return max(1, round(float(gens.evaluations.iloc[-1] - gens.evaluations.iloc[0])))
    return len(load_run(run_folder).trace)


def random_search(board: str, seed: str = "v1", budget: int = 48, out_dir: str | Path = ".", profile: str = "cpu",
                  random_seed: int = 0, structural: bool = True, fitness: Any = None,
                  max_edits: int = DEFAULT_MAX_EDITS, batch: int = 6, progress: bool = False) -> Path:
    """Random search over the search's program space; returns its run folder (``out_dir``).

    ``budget``: programs scored (the search's ``generations x population``, or ``search_budget(run)``);
    ``fitness``: the search's (same dev items, e.g. the search half: build it with ``dev_only.dev_fitness``),
    built for ``board`` from the seed when None; ``max_edits``: the deepest sample (the search's generations);
    ``batch``: programs scored per pass (``generations.csv`` has one row per pass: best so far by evaluations).
    The folder holds what ``selection.select`` and ``runlog.load_run`` read: ``run_info.txt`` (with
    ``control=``), ``initial_program.py``, ``evolution_trace.jsonl``, ``generations.csv``,
    ``fitness_contexts.txt`` and ``best/``. Runs behind the dev-only guard, like the search."""
    with dev_only():
        seed_code = seed_path(seed).read_text()
        fit = fitness if fitness is not None else dev_fitness(board, profile, seed_program=seed_path(seed))
        split = getattr(fit.items, "attrs", {}).get("split")
        if split is not None and split != "dev":
            raise ValueError(f"the control's fitness reads only dev items: this one's items are the {split!r} split")
        return _run(board, seed, seed_code, budget, Path(out_dir), profile, random_seed, structural, fit, max_edits,
                    batch, progress)


def _run(board: str, seed: str, seed_code: str, budget: int, out: Path, profile: str, random_seed: int,
         structural: bool, fit: Any, max_edits: int, batch: int, progress: bool) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "initial_program.py").write_text(seed_code)
    (out / "run_info.txt").write_text(
        f"board={board}\nseed={seed}\nmutator={OFFLINE_NAME}{STRUCTURAL_TAG if structural else ''}\n"
        f"control={CONTROL_TAG}\nfitness=board {board} dev items ({profile}), {fit.items.context_id.nunique()} "
        f"contexts\ngate={fit.gate}\niterations={budget}\nmax_edits={max_edits}\nrandom_seed={random_seed}\n")
    (out / "fitness_contexts.txt").write_text("".join(f"{c}\n" for c in dict.fromkeys(fit.items.context_id)))
    from .threads import THREADS, torch_threads

    with torch_threads(THREADS):  # as the search screens: the same answers, without two threads' spin-waits
        return _sample_and_score(out, seed_code, budget, random_seed, structural, fit, max_edits, batch, progress)


def _sample_and_score(out: Path, seed_code: str, budget: int, random_seed: int, structural: bool, fit: Any,
                      max_edits: int, batch: int, progress: bool) -> Path:
    """The control's programs drawn and scored in batches, then its run folder's results written."""
    seed_result = fit.evaluate([seed_code])[0]
    best = (float(seed_result.fitness or 0.0), candidate_name(seed_code), seed_code)
    samples = list(sample_programs(seed_code, budget, random_seed, max_edits, structural))
    trace, passes = [], [{"pass": 0, "evaluations": 0, "best": best[0]}]
    for start in range(0, budget, batch):
        part = samples[start:start + batch]
        unique = list(dict.fromkeys(s.code for s in part))  # a program drawn twice is evaluated once, as in the search
        by_code = dict(zip(unique, fit.evaluate(unique), strict=True))
        for s in part:
            res = by_code[s.code]
            trace.append(_trace_row(s, res, candidate_name(seed_code), 1 + start // batch))
            if res.fitness is not None and float(res.fitness) > best[0]:
                best = (float(res.fitness), trace[-1]["child_id"], s.code)
        passes.append({"pass": 1 + start // batch, "evaluations": start + len(part), "best": best[0]})
        if progress:
            print(f"random search: {start + len(part)}/{budget} programs, best dev fitness {best[0]:.4f}", flush=True)
    (out / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    pd.DataFrame(passes).to_csv(out / "generations.csv", index=False)
    (out / "best").mkdir(exist_ok=True)
    (out / "best" / "best_program.py").write_text(best[2])
    (out / "best" / "best_program_info.json").write_text(json.dumps({"id": best[1], "fitness": best[0]}))
    return out


def _trace_row(sample: Sampled, res: Any, seed_id: str, generation: int) -> dict:
    """One trace line in ``board_search``'s format; the parent is always the seed (no selection)."""
    metrics = {"combined_score": float(res.fitness if res.fitness is not None else 0.0),
               "gate_score": float(res.gate_score if res.gate_score is not None else 0.0),
               "valid": float(res.valid), "passed_gate": float(res.passed_gate)}
    return {"iteration": sample.index + 1, "generation": generation, "island_id": 0, "parent_id": seed_id,
            "child_id": f"{res.name}-r{sample.index}", "child_code": sample.code, "child_metrics": metrics,
            "llm_response": f"Proposed change: {'; '.join(sample.changes)}\n",
            "artifacts": {"failure_kind": res.failure_kind or "", "invalid": res.reason[:300]}}
