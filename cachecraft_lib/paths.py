"""Where things live: the repository root, data, figures and run outputs (overridable by env vars)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
DATA = Path(os.environ.get("CACHECRAFT_DATA_DIR", REPO / "data"))
MODELS = REPO / "data" / "models"
RUNS = Path(os.environ.get("CACHECRAFT_RUNS_DIR", REPO / "runs"))


def figures_dir() -> Path:
    """Figures and tables go here: ``$CACHECRAFT_FIGURES_DIR`` if set (the runner sets it), else ``figures/``."""
    return Path(os.environ.get("CACHECRAFT_FIGURES_DIR", REPO / "figures"))


def results_dir(kind: str, name: str) -> Path:
    """The default folder of one kind of generated result: ``data/results/<kind>/<name>`` (grid, latency, ...)."""
    return DATA / "results" / kind / name
