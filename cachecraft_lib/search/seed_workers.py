"""A pre-registered study's dev work, seed by seed, side by side in worker processes (notebook 08).

Why: the search scores programs with torch on one thread (``search.threads``: two threads spin-wait on two cores),
so running five seeds one after another leaves a core idle for most of notebook 08. Each seed's work is a chain
(its search; then random search at the budget the search spent; then the selection half's pick from each of the
two runs) and different seeds' chains are independent, so every step goes to a pool of spawned workers as soon as
its input exists. A worker builds its fitness (the search half) and its chooser (the selection half, gate 0) once,
behind the dev-only guard, and keeps them for every step it runs. A fitness's values do not depend on what it
computed before (its memos keep prefills, features and answers, keyed by all that made them), so the run folders
and the picks are the serial path's (``workers=1`` runs the same steps here, in order; tested equal).

Workers are spawned, never forked from a process holding the model, inside the guard: the secret's variables are
not in their environment. A failed step stops the study with its seed and reason; the finished runs stay in
their folders.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dev_only import dev_fitness, dev_only, install


@dataclass(frozen=True)
class StudySettings:
    """What every step needs, picklable (it travels to the workers): the board, the seed program, the sizes, the
    arena's folder (its dev baselines already computed there) and the two halves of the dev contexts."""

    board: str
    seed_program: str
    profile: str
    root: str
    search_contexts: tuple[str, ...]
    selection_contexts: tuple[str, ...]
    generations: int
    population: int
    top_k: int
    out: str
    rows_root: str | None = None
    plan_event: dict | None = None


@dataclass
class SeedWork:
    """One seed's results: its search run and random-search control (folders), the budget the control got, and
    the selection half's pick from each (``selection.Selected``)."""

    random_seed: int
    run: Path
    control: Path | None = None
    budget: int | None = None
    chosen: Any = None
    control_chosen: Any = None


@dataclass
class _Fitnesses:
    """A process's arena (one model), fitness and chooser, built when first needed and kept for its later steps."""

    settings: StudySettings | None = None
    arena: Any = None
    built: dict[str, Any] = field(default_factory=dict)


_MINE = _Fitnesses()


def default_workers(seeds: int, profile: str = "cpu") -> int:
    """One worker per core this process may use (its CPU affinity; a cgroup's CPU quota is not read), at most one
    per seed; one on a CUDA profile, where every worker would hold its own copy of the model on the one GPU."""
    from ..profiles import get_profile

    if get_profile(profile).device == "cuda":
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(seeds, cores))


def seed_study(settings: StudySettings, random_seeds: list[int], workers: int | None = None,
               arena: Any = None) -> dict[int, SeedWork]:
    """Every seed's search, control and picks (``workers``: processes side by side; None: ``default_workers``,
    1: this process, one step after another). ``arena``: the caller's, at ``settings.root`` (its model and kept
    rows serve the dev baselines and, with one worker, every step), else one is made. Returns each seed's
    ``SeedWork``, in ``random_seeds``' order."""
    if not random_seeds or len(set(random_seeds)) != len(random_seeds):
        raise ValueError(f"give distinct random seeds, got {random_seeds}")
    workers = default_workers(len(random_seeds), settings.profile) if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    arena = arena or _arena(settings)
    with dev_only():  # the secret unreachable here and in every worker started from here
        arena.dev_baselines(arena.board(settings.board))  # once, here, before the workers read them
        if workers == 1:
            _MINE.settings, _MINE.arena, _MINE.built = settings, arena, {}
            try:
                works = {s: _chain_here(settings, s) for s in random_seeds}
            finally:  # the fitnesses hold prefills and features: not kept in the caller's process
                _MINE.settings, _MINE.arena, _MINE.built = None, None, {}
        else:
            works = _chains_on_pool(settings, random_seeds, workers)
    return {s: works[s] for s in random_seeds}


def _chain_here(settings: StudySettings, s: int) -> SeedWork:
    from .random_control import search_budget

    work = SeedWork(s, search_step(settings, s))
    work.budget = search_budget(work.run)
    work.chosen = pick_step(settings, str(work.run))
    work.control = control_step(settings, s, work.budget)
    work.control_chosen = pick_step(settings, str(work.control))
    return work


def _chains_on_pool(settings: StudySettings, random_seeds: list[int], workers: int) -> dict[int, SeedWork]:
    """The steps on ``workers`` spawned processes, each submitted when its input exists (searches first)."""
    from .random_control import search_budget

    works: dict[int, SeedWork] = {}
    pool = worker_pool(workers)
    try:
        pending: dict[Future, tuple[str, int]] = {pool.submit(search_step, settings, s): ("search", s)
                                                   for s in random_seeds}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                step, s = pending.pop(future)
                value = _result(future, step, s, settings)
                if step == "search":
                    works[s] = SeedWork(s, value, budget=search_budget(value))
                    pending[pool.submit(control_step, settings, s, works[s].budget)] = ("control", s)
                    pending[pool.submit(pick_step, settings, str(value))] = ("pick", s)
                elif step == "control":
                    works[s].control = value
                    pending[pool.submit(pick_step, settings, str(value))] = ("control pick", s)
                elif step == "pick":
                    works[s].chosen = value
                else:
                    works[s].control_chosen = value
    except BaseException:  # a failed step, an interrupt: stop the other steps now rather than after them
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return works


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes (never forked from one holding the model), each with the guard installed and
    torch on the search's thread count before it runs anything."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_start)


def _worker_start() -> None:
    import torch

    from .threads import THREADS

    install()  # for the worker's life: it never needs the secret
    torch.set_num_threads(THREADS)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued steps and end the running ones (their workers), without waiting for them."""
    processes = list(getattr(pool, "_processes", {}).values())  # CPython's pool has no public way to end a worker
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def _result(future: Future, step: str, s: int, settings: StudySettings) -> Any:
    """The step's value, or a clear stop naming the seed, the step and where the finished runs are."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool as err:
        raise RuntimeError(f"a worker died while random seed {s}'s {step} was among the steps running ({err}); "
                           "often memory: rerun with fewer workers (SEED_WORKERS, 1 runs here); the finished "
                           f"runs are in {settings.out}") from err
    except Exception as err:
        raise RuntimeError(f"random seed {s}'s {step} failed in its worker ({type(err).__name__}: {err}); the "
                           f"finished runs are in {settings.out}: fix the cause and rerun the study") from err


def _arena(settings: StudySettings) -> Any:
    from ..arena.arena import Arena

    return Arena(settings.profile, Path(settings.root), progress=False,
                 rows_root=Path(settings.rows_root) if settings.rows_root else None)


def _fitness(settings: StudySettings, which: str) -> Any:
    """This process's fitness on the search half (``which="search"``, gated by the seed program) or chooser on
    the selection half (``"selection"``, gate 0), built once per study behind the guard."""
    from .seeds import seed_path

    install()  # a no-op where in place (a worker's initializer, or the caller's guard)
    if _MINE.settings != settings:
        _MINE.settings, _MINE.arena, _MINE.built = settings, None, {}
    if which not in _MINE.built:
        arena = _MINE.arena = _MINE.arena or _arena(settings)  # one arena, so one model, for both fitnesses
        if which == "search":
            _MINE.built[which] = dev_fitness(settings.board, settings.profile, root=settings.root, arena=arena,
                                             seed_program=seed_path(settings.seed_program),
                                             contexts=list(settings.search_contexts))
        else:
            _MINE.built[which] = dev_fitness(settings.board, settings.profile, root=settings.root, gate=0.0,
                                             arena=arena, contexts=list(settings.selection_contexts))
    return _MINE.built[which]


def search_step(settings: StudySettings, s: int) -> Path:
    """Seed ``s``'s search run (``board_search``, pre-registered when the settings carry the plan's event)."""
    from .board_search import board_search
    from .board_seeds import run_folder

    folder = run_folder(Path(settings.out) / "runs", settings.board, settings.seed_program, s)
    with dev_only():
        return Path(board_search(settings.board, settings.seed_program, settings.generations, settings.population,
                                 folder, settings.profile, random_seed=s, fitness=_fitness(settings, "search"),
                                 progress=False, plan_event=settings.plan_event))


def control_step(settings: StudySettings, s: int, budget: int) -> Path:
    """Seed ``s``'s control: random search over the same space, at the search's budget, on the same dev items."""
    from .random_control import random_search

    folder = Path(settings.out) / "random" / f"{settings.board}_{s}"
    return random_search(settings.board, settings.seed_program, budget, folder, settings.profile, s,
                         fitness=_fitness(settings, "search"), max_edits=settings.generations,
                         batch=settings.population)


def pick_step(settings: StudySettings, run: str) -> Any:
    """A run's pick: its top K by search-half fitness, scored on the selection half (``selection.select``)."""
    from .selection import select

    with dev_only():
        return select(run, _fitness(settings, "selection"), settings.top_k)
