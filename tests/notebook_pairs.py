"""Two runs of one notebook at once, for the tests that compare a notebook's two runs (its determinism).

Each run is papermill in its own process (spawned, so each sets its own kernel environment: ``run_notebook``
changes ``os.environ`` while it runs, which two threads would share) with its own kernel, as two runs one
after the other are. Each run's kernel gets one compute thread (``THREAD_VARS``): with torch's default of one
thread per core, two kernels on two cores oversubscribe them and spin against each other (measured on two idle
cores, notebook 05's smoke pair: 324 s at once with default threads, 57 s at once with one thread each, 51 s
for one run alone). CI's time limit is why.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from cachecraft_lib.report.notebooks import NotebookRun, list_notebooks, run_notebook

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class SmokeRun:
    """One smoke run of a notebook: where its executed copy and its figures go, and its parameters."""

    folder: Path
    parameters: dict[str, Any] = field(default_factory=dict)


def run_pair(prefix: str, runs: tuple[SmokeRun, SmokeRun]) -> tuple[NotebookRun, NotebookRun]:
    """Notebook ``prefix`` under the smoke profile, once per ``runs`` entry, both at the same time; figures go to
    ``<folder>/f``. Raises the first run's error if either fails."""
    book = list_notebooks([prefix])[0]
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_one_thread_run, book, "smoke", out_dir=run.folder, figures=run.folder / "f",
                               parameters=run.parameters) for run in runs]
        first, second = (future.result() for future in futures)
    return first, second


def _one_thread_run(book: Path, profile: str, **kwargs: Any) -> NotebookRun:
    """``run_notebook`` in this spawned worker with one compute thread, which its kernel inherits."""
    os.environ.update({var: "1" for var in THREAD_VARS})
    return run_notebook(book, profile, **kwargs)
