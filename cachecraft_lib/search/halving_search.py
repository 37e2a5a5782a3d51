"""The search's default engine: islands of elites, structural edits and TPE-tuned constants, screened by successive
halving, run until a budget of evaluations is spent.

Each generation, every island proposes its share of ``population`` children from its elite: with probability
``tpe_share`` new weights for the parent's structure from Optuna's TPE (``constants_tpe``), else one of the offline
mutator's edits (``mutator.propose``: linear-scorer edits and, with ``structural``, the structural operators). The
whole generation is screened together by successive halving (``halving``): most children are culled on a few dev
contexts, the survivors scored on all of them with exactly the plain cascade's result. Fully scored children enter
their island's elite and their structure's TPE study; culled ones enter their study as pruned at their rung.
Lagging islands restart from the seed (``islands``).

Budget: evaluations, counted honestly as context evaluations run divided by the contexts of one full evaluation
(the seed's own evaluation included); the run stops after the generation that reaches it. Deterministic for a
random seed: every draw comes from ``random.Random`` seeded by (seed, generation, slot) and the TPE studies'
samplers by (seed, structure).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .board_fitness import BoardFitness, apply_diff
from .constants_tpe import ConstantsTPE
from .halving import ETA, Halving, Screened
from .islands import PATIENCE, Archipelago, Entry
from .mutator import propose

POPULATION = 12  # children screened per generation (all islands together)
ISLANDS = 3
TPE_SHARE = 0.5


@dataclass(frozen=True)
class EngineSettings:
    """What a run of the halving engine may spend and how it spends it."""

    budget: float  # evaluations (full dev evaluations; a culled child costs its share)
    population: int = POPULATION
    islands: int = ISLANDS
    eta: int = ETA
    tpe_share: float = TPE_SHARE
    patience: int = PATIENCE
    structural: bool = True

    def describe(self) -> str:
        """run_info.txt's lines for the engine (``population`` is written by the caller, as for any engine)."""
        return (f"engine=halving\nbudget={self.budget:g}\nislands={self.islands}\neta={self.eta}\n"
                f"tpe_share={self.tpe_share:g}\npatience={self.patience}\n")


@dataclass
class EngineRun:
    """What a run produced: one trace row per child, one row per generation, the best program."""

    trace: list[dict] = field(default_factory=list)
    generations: list[dict] = field(default_factory=list)
    best: Entry | None = None
    evaluations: float = 0.0


def _edit(parent: str, rng: random.Random, structural: bool) -> tuple[str, str]:
    try:
        diff, change = propose(parent, rng, structural)
        return apply_diff(parent, diff), change
    except ValueError as err:
        return parent, f"(no edit: {err})"


def metrics(s: Screened, cost: float) -> dict[str, Any]:
    """A child's trace metrics: ``combined_score`` only when scored in full (None when culled by halving)."""
    r = s.result
    return {"combined_score": r.fitness, "gate_score": float(r.gate_score if r.gate_score is not None else 0.0),
            "valid": float(r.valid), "passed_gate": float(r.passed_gate), "rung": s.rung,
            "partial_score": s.partial,
            "culled": float(r.valid and r.fitness is None and (r.gate_score is None or r.passed_gate)),
            "cost": round(cost, 6)}


def halving_search(fit: BoardFitness, seed_code: str, settings: EngineSettings, random_seed: int = 0,
                   progress: bool = True) -> EngineRun:
    """Run the engine on ``fit`` (its contexts: the search half) from ``seed_code``; see the module's docstring."""
    halving = Halving(fit, eta=settings.eta)
    tpe = ConstantsTPE(random_seed)
    seed = halving.screen([seed_code])[0]
    if seed.result.fitness is None:
        raise ValueError(f"the seed program has no full score ({seed.result.failure_kind or 'below the gate'}: "
                         f"{seed.result.reason})")
    seed_entry = Entry(float(seed.result.fitness), seed.result.name, seed_code)
    tpe.remember(seed_code, seed_entry.fitness)
    islands = Archipelago.start(settings.islands, seed_entry, settings.patience)
    run = EngineRun(best=seed_entry)
    run.generations.append(_generation_row(0, islands, [seed], halving, []))
    g = 0
    while halving.context_runs / halving.contexts < settings.budget:
        g += 1
        before = halving.context_runs
        proposals = [_propose(islands, tpe, settings, random_seed, g, slot) for slot in range(settings.population)]
        screened = halving.screen([p[2] for p in proposals])
        for slot, ((isl, parent, code, change, asked), s) in enumerate(zip(proposals, screened, strict=True)):
            if asked is not None:
                tpe.tell(asked, s.result.fitness, s.partial, s.rung)
            elif s.result.fitness is not None:
                tpe.remember(code, float(s.result.fitness))
            run.trace.append({"iteration": len(run.trace) + 1, "generation": g, "island_id": isl.index,
                              "parent_id": parent.child_id, "child_id": f"{s.result.name}-g{g}s{slot}",
                              "child_code": code, "child_metrics": metrics(s, s.contexts_run / halving.contexts),
                              "llm_response": f"Proposed change: {change}\n",
                              "artifacts": {"failure_kind": s.result.failure_kind or "",
                                            "invalid": s.result.reason[:300]}})
        for isl in islands.islands:
            isl.add([Entry(float(s.result.fitness), row["child_id"], p[2])
                     for p, s, row in zip(proposals, screened, run.trace[-len(screened):], strict=True)
                     if p[0] is isl and s.result.fitness is not None])
        restarted = islands.restart_lagging()
        run.generations.append(_generation_row(g, islands, screened, halving, restarted,
                                               (halving.context_runs - before) / halving.contexts))
        if progress:
            row = run.generations[-1]
            print(f"generation {g}: best dev fitness {row['best']:.4f}, {row['evaluations']:.1f} of "
                  f"{settings.budget:g} evaluations, {row['full']} of {row['children']} children scored in full"
                  + (f", islands {restarted} restarted" if restarted else ""), flush=True)
    run.best, run.evaluations = islands.best, halving.context_runs / halving.contexts
    return run


def _propose(islands: Archipelago, tpe: ConstantsTPE, settings: EngineSettings, random_seed: int, g: int,
             slot: int) -> tuple:
    """One child of generation ``g``: (island, parent, code, stated change, TPE trial or None)."""
    rng = random.Random(f"{random_seed}:{g}:{slot}")
    isl = islands.island_of(slot)
    parent = isl.parent(rng)
    if rng.random() < settings.tpe_share:
        asked = tpe.ask(parent.code)
        if asked is not None:
            return isl, parent, asked.code, "TPE: new weights for this structure", asked
    code, change = _edit(parent.code, rng, settings.structural)
    return isl, parent, code, change, None


def _generation_row(g: int, islands: Archipelago, screened: list[Screened], halving: Halving, restarted: list[int],
                    spent: float | None = None) -> dict:
    valid = [s for s in screened if s.result.valid]
    gated = [s for s in valid if s.result.gate_score is not None]
    return {"generation": g, "best": islands.best.fitness, "evaluations": halving.context_runs / halving.contexts,
            "spent": spent if spent is not None else halving.context_runs / halving.contexts,
            "children": len(screened), "full": sum(s.full for s in screened),
            "valid_rate": len(valid) / len(screened) if screened else float("nan"),
            "gate_pass_rate": sum(s.result.passed_gate for s in gated) / len(gated) if gated else float("nan"),
            "restarted": " ".join(map(str, restarted))}
