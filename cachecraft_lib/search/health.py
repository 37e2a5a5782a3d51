"""Whether a search's workers can evaluate at all: a run whose every child fails to evaluate stops, and says why.

OpenEvolve turns an exception in the evaluator into ``{"error": 0.0}`` and goes on, so a worker that cannot
build its evaluator (a model forked away from CUDA, a model that does not load) fails every child while the
run carries on for hours. ``evaluator.py`` records each evaluation's outcome in ``worker_health.jsonl`` in
the run folder (one JSON line per evaluation: process id, worker or driver, start method, ok, error); the process that drives
the run watches it (``watch``) and stops the run when its workers' first ``min_children`` evaluations all
failed and none succeeded.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

HEALTH_FILE = "worker_health.jsonl"
MIN_CHILDREN = 3


class EveryChildFailed(RuntimeError):
    """Every child of a run failed in its worker's evaluator (not a candidate's fault)."""


def append_outcome(run_dir: str | Path, ok: bool, error: str = "") -> None:
    """Append this process's evaluation outcome (called by ``evaluator.py``, in the worker)."""
    line = {"pid": os.getpid(), "worker": multiprocessing.parent_process() is not None,
            "start_method": multiprocessing.get_start_method(allow_none=True), "ok": ok, "error": error[:2000]}
    with open(Path(run_dir) / HEALTH_FILE, "a") as f:
        f.write(json.dumps(line) + "\n")


def read(run_dir: str | Path, offset: int = 0) -> list[dict]:
    """The outcomes recorded after byte ``offset`` (a resumed run ignores its earlier ones)."""
    path = Path(run_dir) / HEALTH_FILE
    if not path.is_file():
        return []
    with open(path) as f:
        f.seek(offset)
        return [json.loads(line) for line in f if line.strip()]


def offset(run_dir: str | Path) -> int:
    """Where this run's outcomes start in the health file."""
    path = Path(run_dir) / HEALTH_FILE
    return path.stat().st_size if path.is_file() else 0


def failure(entries: list[dict], min_children: int = MIN_CHILDREN) -> str | None:
    """The message that stops a run, or None: the workers' (not the driver's) evaluations all failed."""
    workers = [e for e in entries if e["worker"]]
    if len(workers) < min_children or any(e["ok"] for e in workers):
        return None
    return (f"every one of the first {len(workers)} children failed in the worker's evaluator, not in the "
            f"candidate; the search was stopped. First error: {workers[0]['error']}\nIf it is 'Cannot "
            f"re-initialize CUDA in forked subprocess', the workers were forked: they must be spawned "
            f"(build_config sets it). Otherwise check that the model in search_config.json loads in a fresh "
            f"process.")


async def watch(task: asyncio.Task, run_dir: Path, start: int, stop: Any, min_children: int = MIN_CHILDREN,
                poll_s: float = 0.5) -> Any:
    """Await the run ``task``; call ``stop()`` and raise ``EveryChildFailed`` as soon as ``failure`` says so."""
    while not task.done():
        await asyncio.wait({task}, timeout=poll_s)
        message = failure(read(run_dir, start), min_children)
        if message and not task.done():
            stop()
            try:
                await task
            except Exception as err:  # the stopped run's own complaint is secondary
                raise EveryChildFailed(message) from err
            raise EveryChildFailed(message)
    result = task.result()
    entries = read(run_dir, start)
    message = failure(entries, min_children=1)
    if message:  # a short run whose every child failed
        raise EveryChildFailed(message)
    return result
