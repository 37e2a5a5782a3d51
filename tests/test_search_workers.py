"""Search workers are spawned, never forked from a process holding the model; a run whose every child fails
in the worker's evaluator stops with a message that says so."""

from __future__ import annotations

import json
import os

import pytest

from cachecraft_lib.profiles import get_profile
from cachecraft_lib.search import health
from cachecraft_lib.search.evolve import build_config

# The two searches below check how workers start and fail, not what they find: the smoke profile on one task
# (the evaluator's cost scales with the tasks; the start method and the health file do not).
ONE_TASK = {"tasks": ("niah_single_1",)}


def _entry(ok: bool, error: str = "", worker: bool = True) -> dict:
    return {"pid": 7, "worker": worker, "start_method": "spawn", "ok": ok, "error": error}


def test_openevolve_config_asks_for_spawned_workers():
    assert build_config(2).max_tasks_per_child is not None  # CPython's pool then spawns (OpenEvolve on 3.10 too)


def test_failure_counts_only_the_workers_and_needs_every_one_failed():
    fail = [_entry(False, "RuntimeError: Cannot re-initialize CUDA in forked subprocess")] * 3
    assert health.failure(fail[:2]) is None  # too few to judge
    message = health.failure(fail)
    assert message and "Cannot re-initialize CUDA" in message and "first 3 children" in message
    assert health.failure(fail + [_entry(True)]) is None  # one child evaluated: the candidates' fault
    assert health.failure([_entry(False, "x", worker=False)] * 5) is None  # the driver's seed evaluation


def test_record_read_and_offset_of_a_resumed_run(tmp_path):
    health.append_outcome(tmp_path, ok=False, error="old")
    start = health.offset(tmp_path)
    health.append_outcome(tmp_path, ok=True)
    entries = health.read(tmp_path, start)
    assert [e["ok"] for e in entries] == [True] and entries[0]["pid"] == os.getpid() and not entries[0]["worker"]
    assert len(health.read(tmp_path)) == 2 and health.read(tmp_path / "none") == []


@pytest.mark.slow
def test_a_search_runs_its_workers_under_spawn(tmp_path):
    from cachecraft_lib.search.evolve import evolve

    evolve("v5", 2, tmp_path, get_profile("smoke", **ONE_TASK), mutator="offline")
    entries = [json.loads(line) for line in (tmp_path / health.HEALTH_FILE).read_text().splitlines()]
    workers = [e for e in entries if e["worker"]]
    assert len(workers) < len(entries) and workers and all(e["ok"] and e["start_method"] == "spawn" for e in workers)


@pytest.mark.slow
def test_a_run_whose_every_child_fails_in_the_worker_stops_with_the_reason(tmp_path, monkeypatch):
    """The workers cannot build their evaluator (here: asked for CUDA on a CPU machine, as a forked CUDA
    worker cannot): the run stops after the first children instead of going on."""
    import torch

    from cachecraft_lib.search import worker
    from cachecraft_lib.search.evolve import evolve

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA to make the workers' evaluator fail")
    real = worker.get_evaluator

    def parent_only():  # the driver builds its evaluator, then the workers are told to load on CUDA
        evaluator = real()
        config = tmp_path / "search_config.json"
        settings = json.loads(config.read_text())
        config.write_text(json.dumps({**settings, "device": "cuda"}))
        return evaluator

    monkeypatch.setattr(worker, "get_evaluator", parent_only)
    with pytest.raises(health.EveryChildFailed, match="failed in the worker's evaluator") as caught:
        evolve("v5", 20, tmp_path, get_profile("smoke", **ONE_TASK), mutator="offline", isolate=False)
    assert "CUDA" in str(caught.value)
    failed = [e for e in health.read(tmp_path) if e["worker"]]
    # stopped well before the run's 20 children (a few more than MIN_CHILDREN can fail while the watch polls)
    assert health.MIN_CHILDREN <= len(failed) < 20 and not any(e["ok"] for e in failed)
