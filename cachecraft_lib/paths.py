"""Where things live: the repository root, data, figures and run outputs (overridable by env vars)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
DATA = Path(os.environ.get("CACHECRAFT_DATA_DIR", REPO / "data"))
MODELS = REPO / "data" / "models"
RUNS = Path(os.environ.get("CACHECRAFT_RUNS_DIR", REPO / "runs"))


COMMITTED_PROFILE = "cpu"  # figures/ holds this profile's figures and tables, and no other's
_profile: str | None = None  # the profile a notebook declared (``use_profile``)


def use_profile(name: str) -> Path:
    """Declare the profile whose figures this process writes (every notebook does, right after its parameters),
    so the notebook itself decides where they go, however it was started (papermill, JupyterLab, the CLI)."""
    global _profile
    _profile = str(name)
    return figures_dir()


def profile_figures_dir(profile: str) -> Path:
    """``figures/`` for the committed profile (cpu), ``runs/<profile>/figures`` for any other."""
    return REPO / "figures" if profile == COMMITTED_PROFILE else RUNS / profile / "figures"


def figures_dir() -> Path:
    """Where figures and tables go: ``$CACHECRAFT_FIGURES_DIR`` if set (``cachecraft reproduce --figures``),
    else by the declared profile (``profile_figures_dir``), else ``figures/``.

    A smoke or paper run never writes over the committed cpu figures unless a folder is named explicitly.
    """
    if os.environ.get("CACHECRAFT_FIGURES_DIR"):
        return Path(os.environ["CACHECRAFT_FIGURES_DIR"])
    return profile_figures_dir(_profile) if _profile else REPO / "figures"


def results_dir(kind: str, name: str) -> Path:
    """The default folder of one kind of generated result: ``data/results/<kind>/<name>`` (grid, latency, ...)."""
    return DATA / "results" / kind / name
