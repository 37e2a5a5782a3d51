"""Two runs of one notebook at once, for the tests that compare a notebook's two runs (its determinism).

Each run is papermill in its own process (spawned, so each sets its own kernel environment: ``run_notebook``
changes ``os.environ`` while it runs, which two threads would share) with its own kernel, as two runs one
after the other are. A smoke kernel keeps about one core busy, so on a two-core machine the pair takes little
more than one run; CI's time limit is why.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from cachecraft_lib.report.notebooks import NotebookRun, list_notebooks, run_notebook


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
        futures = [pool.submit(run_notebook, book, "smoke", out_dir=run.folder, figures=run.folder / "f",
                               parameters=run.parameters) for run in runs]
        first, second = (future.result() for future in futures)
    return first, second
