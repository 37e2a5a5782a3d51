"""The grid on a Ray cluster: one Ray task per (model, length) group of cells, the same result store.

Why a group is the unit: its cells share the model load, the prefill of every sample and the batched decode,
so splitting a group would repeat all three. Each task asks Ray for one GPU when the grid runs on CUDA (or
``cpus_per_task`` CPUs otherwise) and runs ``runner.run_group`` on its worker, writing through ``CellStore``
to ``out_dir``, which every worker must see (a shared filesystem). So resuming, fingerprints and
``load_results`` work as with ``run_grid``, and the two give the same result files.

Faults: a worker that dies mid-group loses only its sample in flight (answers are appended per sample); Ray
re-runs the task (``max_retries``) and it resumes from the store. A cell whose press raises is recorded by
``run_group`` and the rest finishes. A group that fails as a whole (its model cannot load) is reported for
its cells; the other groups go on. Ctrl-C cancels the tasks, shuts down a local cluster (no Ray process is
left behind) and keeps finished cells and partial answers; the same command resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..util.ray import INSTALL_HINT, RayMissing, Tracker, collect, ray_session, require_ray, task_resources
from .cells import Cell
from .runner import check_options, group_cells, run_group, summarize
from .store import CellStore

__all__ = ["INSTALL_HINT", "RayMissing", "require_ray", "run_grid_ray", "task_resources"]


def run_grid_ray(cells: list[Cell], out_dir: str | Path, address: str | None = None, device: str | None = None,
                 dtype: str = "auto", batch_size: int | None = None, decode: str = "batched",
                 cpus_per_task: float = 1, max_retries: int = 3, progress: bool = True) -> pd.DataFrame:
    """``run_grid`` on Ray: returns the same summary (``load_results``, failures in ``attrs["failed"]``).

    ``address``: None starts a local cluster on this machine (``ray.init()``) unless Ray is already
    initialised; "auto" or "ray://host:10001" joins an existing one. ``out_dir`` must be on a filesystem
    every worker sees.
    """
    require_ray()
    check_options(decode, batch_size)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with ray_session(address) as ray:
        resources = task_resources(device, ray.cluster_resources(), cpus_per_task)
        tracker = ray.remote(num_cpus=0)(Tracker).remote()
        task = ray.remote(_group_task).options(**resources, max_retries=max_retries, retry_exceptions=False)
        groups = list(group_cells(cells).values())
        refs = {task.remote(members, str(out), device, dtype, batch_size, decode, tracker): i
                for i, members in enumerate(groups)}
        _, failed = collect(ray, refs, len(cells), lambda: ray.get(tracker.count.remote()), "grid cells (ray)",
                            progress, resume_hint="finished cells are saved and partial answers kept; run the "
                                                  "same command to resume")
    errors = {cell.key: f"group failed: {reason}" for i, reason in failed.items() for cell in groups[i]}
    return summarize(out, cells, errors)


def _group_task(members: list[Cell], out_dir: str, device: str | None, dtype: str, batch_size: int | None,
                decode: str, tracker: Any) -> dict[str, str]:
    """One Ray task: load the group's model, ``run_group`` into the shared store; {cell key: reason} failed."""
    from ..models.loading import load_model

    model, tokenizer = load_model(members[0].model, device=device, dtype=dtype)
    return run_group(members, CellStore(out_dir), model, tokenizer, decode=decode, batch_size=batch_size,
                     on_cell=lambda cell: tracker.settled.remote(cell.key))
