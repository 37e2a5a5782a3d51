"""Run a CacheCraft search with OpenEvolve: ``evolve`` (scripts/CLI) and ``evolve_async`` (notebooks).

OpenEvolve's ``run_evolution`` wraps ``asyncio.run``, which fails inside Jupyter's running loop, so the
controller is driven directly: ``await OpenEvolve(...).run()`` (top-level ``await`` in a notebook).

Determinism: with the offline mutator a run repeats exactly for a ``random_seed``, whoever starts it. The
code sets what that needs (``determinism``): one worker, seeded program ids, a CPU-time limit on candidates
(a loaded machine cannot turn a slow candidate into a timed-out one) and a fixed string hash. The hash seed
only takes effect when an interpreter starts, so a process without it runs the search in a fresh one
(``isolate``); ``cachecraft reproduce`` starts its kernels with it. Resuming from a checkpoint is not identical
to an uninterrupted run (OpenEvolve re-seeds its RNG on load): ``run_info.txt`` says when a run was resumed.
An LLM mutator is deterministic only as far as the server honours OpenEvolve's per-iteration ``seed``
(Ollama does, on the same hardware and model).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..profiles import Profile
from . import health
from .cascade import CONFIG_ENV, PAPER_GATE, PAPER_SEED_S1, SearchSettings
from .determinism import deterministic_ids, hash_seed_fixed, restore_ids
from .exchanges import write_exchanges
from .iterations import iteration_bar, quiet_console
from .mutator import OFFLINE_NAME, STRUCTURAL_TAG, SYSTEM_MESSAGE, init_offline_client
from .seeds import seed_path

EVALUATOR_FILE = Path(__file__).with_name("evaluator.py")
OLLAMA_MODEL = "qwen3.5:35b-a3b-q4_K_M"
OLLAMA_BASE = "http://localhost:11434/v1"
# OpenEvolve's wall-clock limit per evaluation. Candidates are stopped by the sandbox's CPU-time limit;
# this only catches a stuck evaluator, and is far beyond any evaluation so that a slow machine never
# turns into a different run (a timed-out evaluation leaves its thread running and changes what follows).
EVALUATION_BACKSTOP_S = 6 * 3600
WORKER_TASKS = 10**9
LLM_MAX_TOKENS = 8192


class NoCandidates(RuntimeError):
    """No iteration of a run produced a program (e.g. an LLM that never answers with an applicable diff)."""


def settings_for(profile: Profile, seed: str | Path, ratio: float = 0.83) -> SearchSettings:
    """The evaluator settings of a profile: its model, shortest length, task subset and slice sizes."""
    stage1, stage2 = profile.extras.get("search_stage_samples", (1, 2))
    return SearchSettings(model=profile.models[0], length=min(profile.lengths), compression_ratio=ratio,
                          stage1_samples_per_task=stage1, stage2_samples_per_task=stage2,
                          tasks=list(profile.tasks) if profile.tasks else None, max_new_tokens=profile.max_new_tokens,
                          seed=profile.seed, ruler_source=profile.ruler_source, seed_program=str(seed_path(seed)),
                          device=profile.device, dtype=profile.dtype)


def build_config(iterations: int, mutator: str = "offline", seed: int = 42, adversarial: float = 0.0,
                 gate_score: float | None = None, islands: int = 2, ollama_model: str = OLLAMA_MODEL,
                 api_base: str = OLLAMA_BASE, api_key: str = "ollama", max_tokens: int = LLM_MAX_TOKENS,
                 structural: bool = False):
    """OpenEvolve's ``Config`` for CacheCraft: one worker, seeded, the cascade evaluator and its gate.
    ``max_tokens`` caps each LLM answer (a small model on a CPU server needs a small cap to finish in time).
    ``structural`` (offline mutator only, opt-in) adds the structural operators (``operators``)."""
    from openevolve.config import Config, LLMModelConfig

    cfg = Config()
    cfg.max_iterations = iterations
    cfg.random_seed = seed
    cfg.checkpoint_interval = max(1, min(10, iterations // 3 or 1))
    cfg.enforce_evolve_blocks = True
    cfg.max_code_length = 20000
    cfg.log_level = "INFO"
    cfg.prompt.system_message = SYSTEM_MESSAGE
    cfg.prompt.suggest_simplification_after_chars = 100000
    cfg.prompt.num_top_programs, cfg.prompt.num_diverse_programs = 2, 1
    cfg.database.num_islands = islands
    cfg.database.migration_interval = 5
    cfg.database.migration_rate = 0.2
    cfg.database.random_seed = seed
    cfg.evaluator.cascade_evaluation = True
    cfg.evaluator.cascade_thresholds = [0.25 * (gate_score if gate_score is not None else 0.0)]
    cfg.evaluator.timeout = EVALUATION_BACKSTOP_S
    cfg.evaluator.max_retries = 0
    cfg.evaluator.parallel_evaluations = 1
    # Any value makes OpenEvolve's pool spawn its workers (CPython's ProcessPoolExecutor; on 3.10 OpenEvolve
    # asks for spawn itself) instead of forking a process that may hold the model on CUDA: a forked worker's
    # first CUDA call fails. A spawned worker loads the model itself; it never restarts in a run.
    cfg.max_tasks_per_child = WORKER_TASKS
    cfg.evolution_trace.enabled = True
    cfg.evolution_trace.include_code = True
    cfg.evolution_trace.include_prompts = True
    cfg.evolution_trace.include_failures = True
    if mutator == "offline":
        name = OFFLINE_NAME + (f" adversarial={adversarial}" if adversarial else "")
        name += STRUCTURAL_TAG if structural else ""
        model = LLMModelConfig(name=name, weight=1.0, init_client=init_offline_client)
    elif mutator in ("ollama", "openai"):  # any OpenAI-compatible endpoint; the default is a local Ollama
        model = LLMModelConfig(name=ollama_model, weight=1.0, api_base=api_base, api_key=api_key, temperature=0.7,
                               max_tokens=max_tokens, timeout=600, retries=2, retry_delay=5, random_seed=seed)
    else:
        raise ValueError(f"mutator must be 'offline', 'ollama' or 'openai', not {mutator!r}")
    if structural and mutator != "offline":
        raise ValueError("structural operators belong to the offline mutator; an LLM writes its own edits")
    cfg.llm.models = [model]
    cfg.llm.evaluator_models = []
    return cfg


def with_stage_samples(profile: Profile, stage_samples: tuple[int, int] | None) -> Profile:
    """The profile with its search's samples per task at stage 1 and stage 2 replaced (None: unchanged). Notebook
    05's smoke test takes 2 at stage 1: with one per task every child of the seed scores its S1 (each task's one
    sample is kept by all or by none), so S1 cannot rank programs."""
    if stage_samples is None:
        return profile
    first, second = (int(n) for n in stage_samples)
    return replace(profile, extras={**profile.extras, "search_stage_samples": (first, second)})


def search_seeds(profile: Profile, n: int | None = None) -> list[int]:
    """The random seeds of a profile's search: ``n`` (default: ``extras["search_seeds"]``, else 1) from its seed."""
    count = n if n is not None else int(profile.extras.get("search_seeds", 1))
    return [profile.seed + k for k in range(max(1, count))]


def seed_folder(out_dir: str | Path, random_seed: int, first_seed: int) -> Path:
    """The run folder of one seed: ``out_dir`` for the first (as before seeds were repeated), ``<out_dir>_rs<seed>``
    for the others."""
    out = Path(out_dir)
    return out if random_seed == first_seed else out.with_name(f"{out.name}_rs{random_seed}")


def checkpoint_iteration(checkpoint: Path) -> int:
    """The iteration ``n`` of a ``checkpoints/checkpoint_<n>`` folder."""
    return int(checkpoint.name.split("_")[-1])


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest ``checkpoints/checkpoint_<n>`` of a run folder, to resume from."""
    found = sorted(Path(out_dir).glob("checkpoints/checkpoint_*"), key=checkpoint_iteration)
    return found[-1] if found else None


async def evolve_async(seed: str | Path, iterations: int, out_dir: str | Path, profile: Profile,
                       mutator: str = "offline", adversarial: float = 0.0, ratio: float = 0.83,
                       random_seed: int = 42, resume: bool = True, gate: float | None = None,
                       isolate: bool | None = None, board: str | None = None, arena_root: str | None = None,
                       **llm: Any):
    """Run (or resume) a search to ``iterations`` in all; returns OpenEvolve's best ``Program``, or None when
    nothing ran in this process (the folder already holds that many iterations, or the run went to a fresh
    one). ``isolate``: run in a fresh interpreter with the fixed hash seed; None = when this one lacks it
    (module doc). ``board``: the fitness is that arena board's dev score (``board_fitness``; the arena's results
    under ``arena_root``, default the profile's); without it the search scores RULER as before. Usable with
    ``await`` in a notebook."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_checkpoint(out) if resume else None
    done = checkpoint_iteration(checkpoint) if checkpoint else 0
    if done >= iterations:
        print(f"{out} already holds {done} iterations (asked for {iterations}): nothing to run")
        return None
    if isolate is None:
        isolate = not hash_seed_fixed()
    if isolate:
        from .isolate import run_spec, write_spec

        print("this interpreter's string hashes are randomised: running the search in a fresh process "
              "with PYTHONHASHSEED=0, so that it repeats exactly", flush=True)
        await run_spec(write_spec(out, profile, seed=seed, iterations=iterations, mutator=mutator,
                                  adversarial=adversarial, ratio=ratio, random_seed=random_seed, resume=resume,
                                  gate=gate, llm=llm, **_board_args(board, arena_root)))
        return None
    return await _evolve_here(seed, iterations, out, profile, mutator, adversarial, ratio, random_seed,
                              checkpoint, gate, llm, board, arena_root)


def _board_args(board: str | None, arena_root: str | None) -> dict[str, Any]:
    """The board arguments of a fresh process's spec (none without ``--board``: the spec stays as before)."""
    return {"board": board, "arena_root": None if arena_root is None else str(arena_root)} if board else {}


async def _evolve_here(seed: str | Path, iterations: int, out: Path, profile: Profile, mutator: str,
                       adversarial: float, ratio: float, random_seed: int, checkpoint: Path | None,
                       gate: float | None, llm: dict[str, Any], board: str | None = None,
                       arena_root: str | None = None):
    """The search in this process, from ``checkpoint`` (None: from the seed)."""
    from openevolve import OpenEvolve
    from openevolve.controller import EvolutionFailedError

    settings = settings_for(profile, seed, ratio)
    settings.gate = gate
    gate_note = ("set by the caller, not the paper's scaling" if gate is not None else
                 f"paper: {PAPER_GATE} with the seed at {PAPER_SEED_S1}; scaled to this model's seed S1")
    if board:
        settings.extras.update(board=board, profile=profile.name,
                               arena_root=None if arena_root is None else str(Path(arena_root).resolve()))
    settings.save(out / "search_config.json")
    os.environ[CONFIG_ENV] = str((out / "search_config.json").resolve())
    initial = out / "initial_program.py"
    shutil.copyfile(seed_path(seed), initial)

    from . import worker

    worker._EVALUATOR = None  # a new run may have new settings
    gate = worker.get_evaluator().gate  # loads the model once in this process (OpenEvolve evaluates the seed here)
    config = build_config(iterations, mutator, random_seed, adversarial, gate_score=gate, **llm)
    done = checkpoint_iteration(checkpoint) if checkpoint else 0
    shown = mutator if mutator != "offline" else OFFLINE_NAME + (STRUCTURAL_TAG if llm.get("structural") else "")
    (out / "run_info.txt").write_text(
        f"seed={seed}\nmutator={shown}\nadversarial={adversarial}\n"
        f"gate={gate} ({gate_note})\n"
        f"model={settings.model}\nlength={settings.length}\nratio={ratio}\niterations={iterations}\n"
        f"random_seed={random_seed}\nresumed_from={done}\n"
        + (f"fitness=board {board}: arena dev's overall score on its dev items (board_fitness)\n" if board else ""))
    deterministic_ids(random_seed)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        controller = OpenEvolve(str(initial), str(EVALUATOR_FILE), config, output_dir=str(out))
        quiet_console()  # progress: one bar over the iterations (iterations.py), not OpenEvolve's INFO lines
        run = asyncio.ensure_future(controller.run(iterations=iterations - done,
                                                   checkpoint_path=str(checkpoint) if checkpoint else None))

        def stop() -> None:
            if controller.parallel_controller is not None:
                controller.parallel_controller.request_shutdown()

        try:
            with iteration_bar(iterations - done, first=done):
                return await health.watch(run, out, health.offset(out), stop)
        except EvolutionFailedError as err:
            raise NoCandidates(f"{err}. No iteration gave a program to evaluate; each one's reason and what the "
                               f"mutator answered: {out / 'llm_exchanges.md'}") from err
    finally:
        if mutator != "offline":
            write_exchanges(out)  # what the LLM was sent and answered, and each answer's verdict
        restore_ids()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def evolve(*args: Any, **kwargs: Any):
    """Synchronous ``evolve_async`` for scripts and the CLI (not inside a running event loop)."""
    return asyncio.run(evolve_async(*args, **kwargs))
