"""Several random seeds of the board search: one after another, or side by side on Ray (``--ray``).

Why: one search run's result depends on its random seed (docs/board_fitness.md: the last ~0.02 of dev fitness
is the dev items' noise), so a claim about what the search finds wants several seeds. Runs with different seeds
are independent, so with Ray each goes to its own task, which loads the model once and runs ``board_search``
exactly as the serial command does: the run folders hold the same files either way (tested). Without Ray the
runs share one ``BoardFitness``, so every dev context's prefill and features are computed once for all of them.

The board's dev baselines are computed once, before any run, into the arena folder (``root``), which every Ray
worker must see (a shared filesystem), as for ``arena dev --ray``. Only dev items are read: no run needs the
organiser's secret. ``seeds.csv`` in ``out_dir`` holds one row per seed (its run folder and best dev fitness).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..util.ray import Tracker, collect, ray_session, require_ray, task_resources
from .board_search import board_search
from .dev_only import dev_fitness, dev_only, install


def run_folder(out_dir: Path, board: str, seed: str, random_seed: int) -> Path:
    return out_dir / f"{board}_{seed}_{random_seed}"


def board_searches(board: str, seed: str, random_seeds: list[int], generations: int, population: int | None,
                   out_dir: str | Path, profile: str = "cpu", root: str | Path | None = None, structural: bool = True,
                   ray: str | None = None, cpus_per_task: float = 1, max_retries: int = 1,
                   progress: bool = True, contexts: list[str] | None = None,
                   plan_event: dict | None = None, engine: str | None = None, iterations: int | None = None,
                   islands: int | None = None) -> pd.DataFrame:
    """Run ``board_search`` once per random seed; ``ray``: None runs them here one after another, ``"local"`` on a
    local Ray cluster, an address on that cluster. Returns (and writes to ``out_dir/seeds.csv``) one row per seed:
    ``random_seed``, ``run`` (its folder), ``best`` (its best dev fitness) and ``error`` (a failed Ray task).
    ``contexts``: the dev contexts of the fitness (the search half); ``plan_event``: the runs' recorded plan;
    ``engine``, ``iterations``, ``islands``: as ``board_search`` takes them (its defaults when None).
    Every run, here or in a Ray worker, runs behind the dev-only guard (``dev_only``)."""
    from ..arena.arena import Arena

    if not random_seeds or len(set(random_seeds)) != len(random_seeds):
        raise ValueError(f"give distinct random seeds, got {random_seeds}")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args = dict(board=board, seed=seed, generations=generations, population=population, profile=profile,
                structural=structural, contexts=contexts, plan_event=plan_event,
                engine_args={k: v for k, v in dict(engine=engine, iterations=iterations, islands=islands).items()
                             if v is not None})
    with dev_only():  # the secret unreachable here and in every process started from here (Ray's workers)
        arena = Arena(profile=profile, root=root, progress=False)
        arena.dev_baselines(arena.board(board))  # once, before the runs: every run (and worker) reads them
        args["root"] = str(arena.root)
        errors = _serial(out, random_seeds, args, progress) if ray is None else \
            _on_ray(out, random_seeds, args, ray, cpus_per_task, max_retries, progress)
    table = pd.DataFrame([_summary(out, board, seed, s, errors.get(s)) for s in random_seeds])
    table.to_csv(out / "seeds.csv", index=False)
    return table


def _serial(out: Path, random_seeds: list[int], args: dict, progress: bool) -> dict[int, str]:
    """The runs one after another, sharing one fitness (every prefill and feature computed once)."""
    fitness = None
    for s in random_seeds:
        fitness = _search(random_seed=s, out=str(run_folder(out, args["board"], args["seed"], s)), fitness=fitness,
                          progress=progress, **args)[1]
    return {}


def _on_ray(out: Path, random_seeds: list[int], args: dict, ray: str, cpus_per_task: float, max_retries: int,
            progress: bool) -> dict[int, str]:
    """The runs side by side, one Ray task each; returns the failed seeds' errors."""
    from ..profiles import get_profile

    require_ray()
    with ray_session(None if ray == "local" else ray) as session:
        resources = task_resources(get_profile(args["profile"]).device, session.cluster_resources(), cpus_per_task,
                                   what="the board search")
        tracker = session.remote(num_cpus=0)(Tracker).remote()
        task = session.remote(_search_task).options(**resources, max_retries=max_retries, retry_exceptions=False)
        refs = {task.remote(random_seed=s, out=str(run_folder(out, args["board"], args["seed"], s)), tracker=tracker,
                            **args): s for s in random_seeds}
        _, failed = collect(session, refs, len(random_seeds), lambda: session.get(tracker.count.remote()),
                            "search runs (ray)", progress,
                            resume_hint="finished runs are in their folders; rerun the missing seeds")
    return dict(failed)


def _search(board: str, seed: str, random_seed: int, generations: int, population: int, out: str, profile: str,
            root: str, structural: bool, fitness: Any = None, progress: bool = False,
            contexts: list[str] | None = None, plan_event: dict | None = None,
            engine_args: dict | None = None) -> tuple[str, Any]:
    """One run (the serial path and a Ray task's body); returns its folder and the ``BoardFitness`` it used."""
    from .seeds import seed_path

    install()  # a no-op when in place; a Ray worker's process gets it here, before its fitness loads anything
    fitness = fitness or dev_fitness(board, profile, root=root, seed_program=seed_path(seed), contexts=contexts)
    folder = board_search(board, seed, generations, population, out, profile, random_seed=random_seed,
                          structural=structural, fitness=fitness, progress=progress, plan_event=plan_event,
                          **(engine_args or {}))
    return str(folder), fitness


def _search_task(tracker: Any, **kwargs: Any) -> str:
    """One Ray task: a run with its own model and prefills (the worker's); returns the run folder."""
    folder, _ = _search(**kwargs)
    tracker.settled.remote(str(kwargs["random_seed"]))
    return folder


def _summary(out: Path, board: str, seed: str, random_seed: int, error: str | None) -> dict:
    folder = run_folder(out, board, seed, random_seed)
    gens = folder / "generations.csv"
    best = float(pd.read_csv(gens).best.max()) if gens.is_file() and error is None else float("nan")
    return {"random_seed": random_seed, "run": str(folder), "best": best, "error": error or ""}
