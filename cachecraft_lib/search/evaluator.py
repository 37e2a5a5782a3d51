"""OpenEvolve evaluator file for CacheCraft: ``evaluate``, ``evaluate_stage1``, ``evaluate_stage2``.

OpenEvolve executes this file anew for every evaluation, so it only delegates to the worker's cached
evaluator (``cachecraft_lib.search.worker``), which is configured by ``$CACHECRAFT_SEARCH_CONFIG``.
A worker loads it before naming its first child, so a spawned worker installs its seeded ids here. Each
evaluation's outcome goes to the run folder's health file, so that a run whose every child fails in the
evaluator itself stops (``cachecraft_lib.search.health``), and the process's peak memory so far goes to
``worker_memory.jsonl`` (``cachecraft_lib.search.memory``): the workers hold the model, not the driver.
"""

import os
from pathlib import Path

from cachecraft_lib.search import health, memory
from cachecraft_lib.search.cascade import CONFIG_ENV, as_openevolve
from cachecraft_lib.search.determinism import worker_ids
from cachecraft_lib.search.worker import get_evaluator

worker_ids()


def _evaluated(stage, program_path):
    run_dir = Path(os.environ.get(CONFIG_ENV, "search_config.json")).parent
    try:
        result = stage(get_evaluator(), Path(program_path).read_text())
    except Exception as err:  # OpenEvolve would turn it into {"error": 0.0} and carry on
        health.append_outcome(run_dir, ok=False, error=f"{type(err).__name__}: {err}")
        raise
    health.append_outcome(run_dir, ok=True)
    memory.append_reading(run_dir)
    return as_openevolve(result)


def evaluate_stage1(program_path):
    return _evaluated(lambda ev, source: ev.stage1(source), program_path)


def evaluate_stage2(program_path):
    return _evaluated(lambda ev, source: ev.stage2(source), program_path)


def evaluate(program_path):
    return _evaluated(lambda ev, source: ev.stage2(source), program_path)
