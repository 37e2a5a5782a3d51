"""The board search on a board's dev items: two engines, one run folder format.

``engine="halving"`` (the default, ``halving_search``): islands of elites propose children by the offline
mutator's edits (``mutator.propose``, structural operators included) and TPE-tuned weights (``constants_tpe``);
each generation is screened by successive halving over the dev contexts (``halving``), so most children cost a few
contexts and the survivors get exactly the cascade's full score; the budget is in evaluations, culled children
counting their share. ``engine="generational"`` (the earlier loop, kept as the baseline ``benchmarks/bench_search.py``
compares with): a small elite, ``population`` children per generation, every one scored in full by
``BoardFitness.evaluate`` (static checks, gate items, all dev items; one prefill per context kept across
generations). Both are deterministic for a seed: every draw comes from ``random.Random`` seeded by (seed,
generation, slot), the TPE samplers by (seed, structure).

It writes a run folder ``runlog.load_run`` and ``arena submit-search`` read: ``run_info.txt``,
``initial_program.py``, ``evolution_trace.jsonl`` (one line per child: parent, code, metrics, the mutator's
stated change; a child culled by halving has ``combined_score`` null and its ``partial_score``, ``rung`` and
``cost``), ``generations.csv`` (best fitness and evaluations spent by generation), ``fitness_contexts.txt`` (the
dev contexts its fitness used: the search half when the run selects on the other), ``best/`` and, for a
pre-registered run, ``plan.json``; ``run_info.txt``'s ``started=`` is written before the first evaluation. It
reads only the dev items: the test split needs the organiser's secret, which the search process never holds
(``dev_only``: the guard is in place before its fitness loads anything and until the search returns).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd

from .board_fitness import BoardFitness, apply_diff, candidate_name
from .dev_only import dev_fitness, dev_only
from .mutator import OFFLINE_NAME, STRUCTURAL_TAG, propose
from .preregister import now, write_plan_ref
from .seeds import seed_path

ELITE = 4


def _child(parent: str, rng: random.Random, structural: bool) -> tuple[str, str]:
    """One proposal applied to ``parent``: (child code, stated change); the parent itself if the edit fails."""
    try:
        diff, change = propose(parent, rng, structural)
    except ValueError as err:
        return parent, f"(no edit: {err})"
    try:
        return apply_diff(parent, diff), change
    except ValueError as err:
        return parent, f"(no edit: {err})"


def _metrics(result: Any) -> dict[str, float]:
    return {"combined_score": float(result.fitness if result.fitness is not None else 0.0),
            "gate_score": float(result.gate_score if result.gate_score is not None else 0.0),
            "valid": float(result.valid), "passed_gate": float(result.passed_gate)}


def fitness_refused(fitness: Any, board: str, preregistered: bool) -> str:
    """Why ``fitness`` may not drive this run, or '': its items must not say a split other than dev, and a
    pre-registered run's fitness must be ``dev_only.dev_fitness``'s (``guarded``: built behind the guard, from
    the board's dev items) for the run's own board, or its run_info would claim dev items it cannot vouch for."""
    split = getattr(fitness.items, "attrs", {}).get("split")
    if split is not None and split != "dev":
        return f"the search's fitness reads only dev items: this one's items are the {split!r} split"
    if not preregistered:
        return ""
    if not getattr(fitness, "guarded", False):
        return ("a pre-registered run takes only the fitness search.dev_only.dev_fitness builds behind the dev-only "
                "guard (guarded); this one was built otherwise")
    if fitness.board.name != board:
        return f"the fitness is board {fitness.board.name}'s, the run board {board}'s"
    return ""


ENGINES = ("halving", "generational")  # the default first; "generational": the earlier loop, kept as a baseline
DEFAULT_ENGINE = ENGINES[0]
POPULATION = {"halving": 12, "generational": 6}  # children per generation, by engine


def board_search(board: str, seed: str = "v1", generations: int = 5, population: int | None = None, out_dir: str | Path = ".",
                 profile: str = "cpu", random_seed: int = 0, structural: bool = True,
                 fitness: BoardFitness | None = None, progress: bool = True, plan_event: dict | None = None,
                 engine: str = DEFAULT_ENGINE, iterations: int | None = None, islands: int | None = None) -> Path:
    """Run the search; returns the run folder (``out_dir``), whose ``best/best_program.py`` is the best found.
    ``engine``: "halving" (``halving_search``: islands, TPE-tuned constants, successive halving) or
    "generational" (the earlier loop: ``population`` children per generation, each scored in full);
    ``iterations``: the budget in evaluations (default ``generations x population``, population 6 when not given:
    the earlier loop's children, each one evaluation); the generational engine runs ``ceil(iterations /
    population)`` generations; ``population``: children per generation (default ``POPULATION[engine]``);
    ``islands``: the halving engine's islands (default 3).
    ``fitness``: built by ``dev_only.dev_fitness`` (the guard in place) unless given; ``plan_event``: the
    ledger's ``plan`` event of a pre-registered run (``preregister``), referenced from ``plan.json``; such a run
    takes only a fitness ``dev_fitness`` built (``guarded``), for ``board`` (``fitness_refused``). The dev-only
    guard is held for the whole search, every child's evaluation included (installed here when none is active,
    taken down at the end, on error too): a given fitness's evaluation runs behind it as well (red team 2)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    budget = iterations if iterations is not None else generations * (population or POPULATION["generational"])
    population = population or POPULATION[engine]
    if budget < 1 or population < 1:
        raise ValueError(f"iterations and population must be at least 1, got {budget} and {population}")
    with dev_only():
        return _search(board, seed, budget, population, Path(out_dir), profile, random_seed, structural, fitness,
                       progress, plan_event, engine, islands)


def _search(board: str, seed: str, budget: int, population: int, out: Path, profile: str, random_seed: int,
            structural: bool, fitness: BoardFitness | None, progress: bool, plan_event: dict | None, engine: str,
            islands: int | None) -> Path:
    """``board_search``'s body, run behind the guard."""
    seed_code = seed_path(seed).read_text()
    if fitness is None:
        fitness = dev_fitness(board, profile, seed_program=seed_path(seed))
    fit = fitness
    problem = fitness_refused(fit, board, plan_event is not None)
    if problem:
        raise ValueError(problem)
    out.mkdir(parents=True, exist_ok=True)
    (out / "initial_program.py").write_text(seed_code)
    if plan_event is not None:
        write_plan_ref(out, plan_event)
    contexts = fit.items.context_id.nunique()
    generations = -(-budget // population)
    settings = None
    if engine == "halving":
        from .halving_search import ISLANDS, EngineSettings

        settings = EngineSettings(budget, population, islands or ISLANDS, structural=structural)
    (out / "run_info.txt").write_text(
        f"board={board}\nseed={seed}\nmutator={OFFLINE_NAME}{STRUCTURAL_TAG if structural else ''}\nfitness=board "
        f"{board} dev items ({profile}), {contexts} contexts\ngate={fit.gate}\niterations={budget}\n"
        + f"generations={generations}\n" + (settings.describe() if settings else "engine=generational\n")
        + f"population={population}\nrandom_seed={random_seed}\n"
        + (f"started={now()}\n" if plan_event is not None else ""))
    (out / "fitness_contexts.txt").write_text("".join(f"{c}\n" for c in dict.fromkeys(fit.items.context_id)))
    if settings is not None:
        from .halving_search import halving_search

        run = halving_search(fit, seed_code, settings, random_seed, progress)
        best = (run.best.fitness, run.best.child_id, run.best.code)
        return write_run(out, run.trace, run.generations, best)
    trace, gens, best = _generational(fit, seed_code, generations, population, random_seed, structural, progress)
    return write_run(out, trace, gens, best)


def write_run(out: Path, trace: list[dict], gens: list[dict], best: tuple[float, str, str]) -> Path:
    """The run folder's results: the trace, ``generations.csv`` and ``best/``."""
    (out / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    pd.DataFrame(gens).to_csv(out / "generations.csv", index=False)
    best_fitness, best_id, best_code = best
    (out / "best").mkdir(exist_ok=True)
    (out / "best" / "best_program.py").write_text(best_code)
    (out / "best" / "best_program_info.json").write_text(json.dumps({"id": best_id, "fitness": best_fitness}))
    return out


def _generational(fit: BoardFitness, seed_code: str, generations: int, population: int, random_seed: int,
                  structural: bool, progress: bool) -> tuple[list[dict], list[dict], tuple[float, str, str]]:
    """The generational engine: ``population`` children a generation, every one scored in full by the cascade.
    ``evaluations`` (generations.csv) counts context runs over the contexts of a full evaluation, as the halving
    engine does."""
    runs0, n_ctx = fit.runner.context_runs, fit.items.context_id.nunique()

    def spent() -> float:
        return (fit.runner.context_runs - runs0) / n_ctx

    seed_result = fit.evaluate([seed_code])[0]
    seed_id = candidate_name(seed_code)
    elite = [(float(seed_result.fitness or 0.0), seed_id, seed_code)]
    trace, gens = [], [{"generation": 0, "best": elite[0][0], "gate_pass_rate": float(seed_result.passed_gate),
                        "valid_rate": float(seed_result.valid), "children": 1, "evaluations": spent()}]
    for g in range(1, generations + 1):
        children = []
        for slot in range(population):
            rng = random.Random(f"{random_seed}:{g}:{slot}")
            parent = min(rng.sample(range(len(elite)), min(2, len(elite))))  # tournament of two, elite sorted
            code, change = _child(elite[parent][2], rng, structural)
            children.append((elite[parent][1], code, change))
        unique = list(dict.fromkeys(c[1] for c in children))  # a program proposed twice is evaluated once
        by_code = dict(zip(unique, fit.evaluate(unique), strict=True))
        results = [by_code[c[1]] for c in children]
        for slot, ((parent_id, code, change), res) in enumerate(zip(children, results, strict=True)):
            trace.append({"iteration": (g - 1) * population + slot + 1, "generation": g, "island_id": 0,
                          "parent_id": parent_id, "child_id": f"{res.name}-g{g}s{slot}", "child_code": code,
                          "child_metrics": _metrics(res), "llm_response": f"Proposed change: {change}\n",
                          "artifacts": {"failure_kind": res.failure_kind or "", "invalid": res.reason[:300]}})
            if res.fitness is not None:
                elite.append((float(res.fitness), trace[-1]["child_id"], code))
        elite = sorted(elite, key=lambda e: -e[0])[:ELITE]
        valid = [r for r in results if r.valid]
        gens.append({"generation": g, "best": elite[0][0], "children": len(results),
                     "valid_rate": len(valid) / len(results),
                     "gate_pass_rate": sum(r.passed_gate for r in valid) / len(valid) if valid else float("nan"),
                     "evaluations": spent()})
        if progress:
            print(f"generation {g}/{generations}: best dev fitness {elite[0][0]:.4f}, gate pass rate "
                  f"{gens[-1]['gate_pass_rate']:.2f}", flush=True)
    return trace, gens, elite[0]
