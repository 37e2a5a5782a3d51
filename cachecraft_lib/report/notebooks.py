"""Run the notebooks headlessly with papermill, and read back the values they record.

A notebook tells the story and calls the library; its last cells call ``record(...)`` with the
numbers it found. Tests and ``cachecraft reproduce`` execute it with a profile injected through
the ``parameters`` cell and read those numbers back with ``read_records``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..paths import NOTEBOOKS, REPO, RUNS

if TYPE_CHECKING:
    from .notebook_progress import Progress

RECORD_MIME = "application/vnd.cachecraft.record+json"
KERNEL_NAME = "cachecraft"
KERNEL_DISPLAY = "Python (cachecraft .venv)"


# The kernel's environment: string hashes (set iteration order, OpenEvolve's parent sampling) fixed, as
# PYTHONHASHSEED takes effect only when an interpreter starts (see cachecraft_lib.search.determinism); progress
# bars as text lines papermill can forward (cachecraft_lib.util.progress).
# tqdm.auto's "IProgress not found" (no ipywidgets) is filtered: a headless run has no browser to draw widgets,
# tqdm falls back to the text bars papermill forwards, and installing ipywidgets would hide them instead.
KERNEL_ENV = {"PYTHONHASHSEED": "0", "CACHECRAFT_HEADLESS": "1"}
KERNEL_WARNINGS = "ignore:IProgress not found"


class NotebookFailed(RuntimeError):
    """A notebook raised: names the notebook, the cell and the error, and where the executed copy is."""

    def __init__(self, notebook: Path, cell_index: int | None, error: str, executed: Path) -> None:
        self.notebook, self.cell_index, self.error, self.executed = notebook, cell_index, error, executed
        where = f"cell {cell_index}" if cell_index is not None else "an unknown cell"
        super().__init__(f"{notebook.name} failed in {where}: {error}\n  executed copy: {executed}")


def record(**values: Any) -> dict[str, Any]:
    """Publish named results from a notebook cell so tests and the runner can read them back.

    Values must be JSON-serialisable (numbers, strings, lists, dicts). Shown as plain text too.
    """
    from IPython.display import display

    payload = _finite(json.loads(json.dumps(values, default=_jsonable)))
    display({RECORD_MIME: payload, "text/plain": f"recorded: {sorted(payload)}"}, raw=True)
    return payload


def nan_as_none(frame: Any) -> Any:
    """A frame (or series) with NaN as None: how notebooks record a cell that has no interval (one sample per
    task), so ``record`` writes ``null`` rather than a "nan" string."""
    return frame.astype(object).where(frame.notna(), None)


def _finite(value: Any) -> Any:
    """NaN and infinities as the strings jupyter_client would make of them ("nan", "inf"), written here so the
    kernel sends valid JSON instead of warning that "Out of range float values are not JSON compliant"."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"record(): {type(value).__name__} is not JSON-serialisable")


def read_records(executed: str | Path) -> dict[str, Any]:
    """All values recorded by an executed notebook, later cells overriding earlier ones."""
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    out: dict[str, Any] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if RECORD_MIME in data:
                payload = data[RECORD_MIME]
                out.update(json.loads(payload) if isinstance(payload, str) else payload)
    return out


def list_notebooks(only: Iterable[str] | None = None, folder: Path = NOTEBOOKS) -> list[Path]:
    """The ordered notebooks (``NN_name.ipynb``); ``only`` keeps those whose prefix or name matches."""
    books = sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))
    if only:
        wanted = [str(o) for o in only]
        books = [b for b in books if any(b.name.startswith(w) or b.stem == w for w in wanted)]
        if not books:
            raise ValueError(f"no notebook matches {wanted}; have {[p.name for p in list_notebooks(folder=folder)]}")
    return books


def ensure_kernel() -> str:
    """Register this interpreter as the ``cachecraft`` Jupyter kernel (in its own prefix) if it is not."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        if spec.argv and Path(spec.argv[0]).resolve() == Path(sys.executable).resolve():
            return KERNEL_NAME
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY, prefix=sys.prefix)
    return KERNEL_NAME


@dataclass
class NotebookRun:
    notebook: Path
    executed: Path
    seconds: float
    records: dict[str, Any]


def run_notebook(notebook: str | Path, profile: str = "smoke", out_dir: str | Path | None = None,
                 parameters: dict[str, Any] | None = None, figures: str | Path | None = None,
                 timeout: int | None = None, progress: bool | TextIO | Progress = False) -> NotebookRun:
    """Execute one notebook with papermill, injecting ``PROFILE`` (and ``parameters``) into its tagged cell.

    The executed copy goes to ``out_dir`` (default ``runs/notebooks/<profile>/``, ignored by git).
    Figures go to ``figures`` (default: ``figures/`` for ``cpu``, ``runs/<profile>/figures`` otherwise).
    The kernel starts with ``KERNEL_ENV`` (a fixed string hash), so a notebook's results do not depend on
    the caller's shell. ``progress`` (True: to stdout; or a stream, or a ``Progress``): each cell as it starts
    (k of n, elapsed), the kernel's progress bars and log lines, and a line at least every minute
    (``notebook_progress``). Raises ``NotebookFailed`` naming the cell on error.
    """
    import time

    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from .notebook_progress import ENGINE

    notebook = Path(notebook)
    out = Path(out_dir) if out_dir else RUNS / "notebooks" / profile
    out.mkdir(parents=True, exist_ok=True)
    executed = out / notebook.name
    fig_dir = Path(figures) if figures else default_figures_dir(profile)
    params = {"PROFILE": profile, **(parameters or {})}
    reporter = _reporter(progress, notebook.stem)
    start = time.time()
    warnings = ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), KERNEL_WARNINGS) if w)
    with kernel_env(CACHECRAFT_FIGURES_DIR=str(fig_dir), PYTHONWARNINGS=warnings, **KERNEL_ENV):
        try:
            pm.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name=ensure_kernel(),
                                cwd=str(notebook.parent), progress_bar=False, execution_timeout=timeout,
                                log_output=False, engine_name=ENGINE, progress=reporter, stderr_file=reporter)
        except PapermillExecutionError as err:
            raise NotebookFailed(notebook, err.cell_index, f"{err.ename}: {err.evalue}", executed) from None
    return NotebookRun(notebook, executed, time.time() - start, read_records(executed))


def _reporter(progress: Any, name: str) -> Progress | None:
    from .notebook_progress import Progress

    if progress is False or progress is None:
        return None
    return progress if isinstance(progress, Progress) else Progress(name, None if progress is True else progress)


@contextmanager
def kernel_env(**values: str) -> Iterator[None]:
    """Set environment variables for the kernel papermill starts (it inherits ours), then restore them."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def default_figures_dir(profile: str) -> Path:
    """``figures/`` holds the committed figures of the default ``cpu`` run; other profiles write elsewhere."""
    return REPO / "figures" if profile == "cpu" else RUNS / profile / "figures"


def notebook_has_outputs(path: str | Path) -> list[int]:
    """Indices of code cells that carry outputs or execution counts (committed notebooks must have none)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]


def strip_outputs(path: str | Path) -> None:
    """Remove outputs and execution counts in place (``make clean-notebooks``)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
        c.metadata.pop("papermill", None)
        c.metadata.pop("execution", None)
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, str(path))


