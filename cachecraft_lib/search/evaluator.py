"""OpenEvolve evaluator file for CacheCraft: ``evaluate``, ``evaluate_stage1``, ``evaluate_stage2``.

OpenEvolve executes this file anew for every evaluation, so it only delegates to the worker's cached
``CascadeEvaluator`` (``cachecraft_lib.search.cascade``), which is configured by ``$CACHECRAFT_SEARCH_CONFIG``.
A worker loads it before naming its first child, so a spawned worker installs its seeded ids here.
"""

from pathlib import Path

from cachecraft_lib.search.cascade import as_openevolve, get_evaluator
from cachecraft_lib.search.determinism import worker_ids

worker_ids()


def evaluate_stage1(program_path):
    return as_openevolve(get_evaluator().stage1(Path(program_path).read_text()))


def evaluate_stage2(program_path):
    return as_openevolve(get_evaluator().stage2(Path(program_path).read_text()))


def evaluate(program_path):
    return as_openevolve(get_evaluator().stage2(Path(program_path).read_text()))
