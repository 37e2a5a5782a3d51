"""The grid on a Ray cluster: one Ray task per (model, length) group of cells, the same result store.

Why a group is the unit: its cells share the model load, the prefill of every sample and the batched decode,
so splitting a group would repeat all three. Each task asks Ray for one GPU when the grid runs on CUDA (or
``cpus_per_task`` CPUs otherwise) and runs ``runner.run_group`` on its worker, writing through ``CellStore``
to ``out_dir``, which every worker must see (a shared filesystem). So resuming, fingerprints and
``load_results`` work as with ``run_grid``, and the two give the same result files.

Faults: a worker that dies mid-group loses only its sample in flight (answers are appended per sample); Ray
re-runs the task (``max_retries``) and it resumes from the store. A cell whose press raises is recorded by
``run_group`` and the rest finishes. A group that fails as a whole (its model cannot load) is reported for
its cells; the other groups go on. Ctrl-C cancels the tasks; finished cells and partial answers stay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from .cells import Cell
from .runner import check_options, group_cells, run_group, summarize
from .store import CellStore

INSTALL_HINT = 'Ray is not installed: pip install -e ".[ray]"  (or: pip install "ray==2.60.0")'
POLL_S = 1.0


class RayMissing(RuntimeError):
    """``--ray`` without Ray installed; the message says how to install it."""


def require_ray() -> Any:
    """The ``ray`` module, or ``RayMissing`` with the command that installs it."""
    try:
        import ray
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    return ray


def task_resources(device: str | None, cluster: dict[str, float], cpus_per_task: float) -> dict[str, float]:
    """What one group's task asks Ray for: one GPU when the grid runs on CUDA (``device`` "cuda", or None on
    a cluster that has GPUs), else ``cpus_per_task`` CPUs. A CUDA grid on a cluster without GPUs is an error."""
    if cpus_per_task <= 0:
        raise ValueError(f"cpus_per_task must be > 0, got {cpus_per_task}")
    gpus = cluster.get("GPU", 0)
    wants_gpu = (device or "").startswith("cuda") or (device is None and gpus > 0)
    if wants_gpu and gpus < 1:
        raise ValueError(f"the grid runs on {device or 'cuda'} but the Ray cluster has no GPU "
                         f"(resources: {cluster}); connect to a cluster with GPUs or run a CPU profile")
    return {"num_gpus": 1, "num_cpus": cpus_per_task} if wants_gpu else {"num_cpus": cpus_per_task}


def run_grid_ray(cells: list[Cell], out_dir: str | Path, address: str | None = None, device: str | None = None,
                 dtype: str = "auto", batch_size: int | None = None, decode: str = "batched",
                 cpus_per_task: float = 1, max_retries: int = 3, progress: bool = True) -> pd.DataFrame:
    """``run_grid`` on Ray: returns the same summary (``load_results``, failures in ``attrs["failed"]``).

    ``address``: None starts a local cluster on this machine (``ray.init()``) unless Ray is already
    initialised; "auto" or "ray://host:10001" joins an existing one. ``out_dir`` must be on a filesystem
    every worker sees.
    """
    ray = require_ray()
    check_options(decode, batch_size)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = not ray.is_initialized()
    if started:  # a local cluster needs no dashboard; an existing cluster keeps its own settings
        ray.init(address=address) if address else ray.init(include_dashboard=False)
    try:
        resources = task_resources(device, ray.cluster_resources(), cpus_per_task)
        tracker = ray.remote(num_cpus=0)(_Tracker).remote()
        task = ray.remote(_group_task).options(**resources, max_retries=max_retries, retry_exceptions=False)
        groups = list(group_cells(cells).values())
        refs = {task.remote(members, str(out), device, dtype, batch_size, decode, tracker): members
                for members in groups}
        errors = _collect(ray, refs, tracker, len(cells), progress)
    finally:
        if started:
            ray.shutdown()
    return summarize(out, cells, errors)


def _collect(ray: Any, refs: dict, tracker: Any, total: int, progress: bool) -> dict[str, str]:
    """Wait for every task with a bar over settled cells; {cell key: reason} of groups that failed whole."""
    errors: dict[str, str] = {}
    bar = tqdm(total=total, desc="grid cells (ray)", disable=not progress)
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as err:
                    reason = f"group failed: {type(err).__name__}: {str(err).splitlines()[0][:300]}"
                    errors.update({cell.key: reason for cell in refs[ref]})
            bar.update(ray.get(tracker.count.remote()) - bar.n)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        bar.close()
        print("interrupted: Ray tasks cancelled; finished cells are saved and partial answers kept; "
              "run the same command to resume")
        raise
    bar.close()
    return errors


class _Tracker:
    """A Ray actor that counts settled cells by key, so a retried task does not count its cells twice."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def settled(self, key: str) -> None:
        self.keys.add(key)

    def count(self) -> int:
        return len(self.keys)


def _group_task(members: list[Cell], out_dir: str, device: str | None, dtype: str, batch_size: int | None,
                decode: str, tracker: Any) -> dict[str, str]:
    """One Ray task: load the group's model, ``run_group`` into the shared store; {cell key: reason} failed."""
    from ..models import load_model

    model, tokenizer = load_model(members[0].model, device=device, dtype=dtype)
    return run_group(members, CellStore(out_dir), model, tokenizer, decode=decode, batch_size=batch_size,
                     on_cell=lambda cell: tracker.settled.remote(cell.key))
