"""Notebook tests: each executes one notebook under the smoke profile with papermill and asserts the values it
recorded (``cachecraft_lib.report.notebooks.record``), pinned where the smoke run is deterministic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cachecraft_lib.report.notebooks import list_notebooks, run_notebook


@pytest.fixture()
def figures(tmp_path: Path) -> Path:
    """Where the notebook under test writes its figures and tables."""
    return tmp_path / "f"


@pytest.fixture()
def smoke(tmp_path: Path, figures: Path) -> Callable[..., dict[str, Any]]:
    """``smoke("03", SAMPLES=2)``: run notebook 03 under the smoke profile with those parameters; its records."""

    def run(prefix: str, **parameters: Any) -> dict[str, Any]:
        book = list_notebooks([prefix])[0]
        return run_notebook(book, "smoke", out_dir=tmp_path, figures=figures, parameters=parameters).records

    return run
