"""Per-sample RULER scores of grid cells: the input of the paired bootstrap (``cachecraft_lib.stats.intervals``).

A cell's ``result.json`` keeps every prediction; scoring each row on its own (the same clean-up and
substring match as ``ruler.score``, unrounded) gives one score per sample whose task means and aggregate
must reproduce the stored ones. A file that cannot be read, lacks predictions or disagrees with its own
stored scores is skipped with a ``CorruptResultWarning`` naming it, so no interval rests on it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ..ruler.scoring import as_refs, clean_prediction
from ..ruler.templates import task_family
from .cells import Cell
from .store import RESULT

COLUMNS = ["cell", "model", "length", "method", "ratio", "task", "index", "score"]
TOLERANCE = 0.005 + 1e-9  # stored scores are rounded to 2 dp


class CorruptResultWarning(UserWarning):
    """A result file was skipped: unreadable, incomplete, or its predictions do not give its stored scores."""


def sample_score(task: str, prediction: object, refs: Sequence[str]) -> float:
    """One row's RULER score x100: any reference found for qa tasks, else the fraction of references found."""
    pred = clean_prediction("" if prediction is None else prediction).lower()
    hits = [1.0 if r.lower() in pred else 0.0 for r in refs]
    return 100.0 * (max(hits) if task_family(task) == "qa" else sum(hits) / len(hits))


def cell_samples(result: dict, cell: str) -> pd.DataFrame:
    """The tidy per-sample rows of one parsed ``result.json`` (no checks)."""
    config = result["config"]
    rows = [{"cell": cell, "model": config["model"], "length": config["length"], "method": config["method"],
             "ratio": config["ratio"], "task": p["task"], "index": int(p["index"]),
             "score": sample_score(p["task"], p["predicted_answer"], as_refs(p["answer"]))}
            for p in result["predictions"]]
    return pd.DataFrame(rows, columns=COLUMNS)


def mismatches(samples: pd.DataFrame, scores: dict[str, float]) -> list[str]:
    """Where per-sample scores fail to give the stored per-task scores and aggregate (empty: they agree)."""
    means = samples.groupby("task")["score"].mean()
    stored = {t: v for t, v in scores.items() if t != "aggregate"}
    bad = [f"tasks {sorted(means.index)} vs stored {sorted(stored)}"] if set(means.index) != set(stored) else []
    bad += [f"{t}: {means[t]:.4f} vs stored {v}" for t, v in stored.items()
            if t in means and abs(means[t] - v) > TOLERANCE]
    if not bad and abs(sum(stored.values()) / len(stored) - scores["aggregate"]) > TOLERANCE:
        bad.append(f"aggregate: stored {scores['aggregate']} is not the mean of its task scores")
    return bad


def read_cell(path: Path) -> pd.DataFrame | None:
    """Per-sample scores of one result file, checked; ``None`` (and a warning) when it cannot be trusted."""
    try:
        result = json.loads(path.read_text())
        samples = cell_samples(result, path.parent.name)
        problems = mismatches(samples, result["scores"])
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError,
            ZeroDivisionError) as err:
        problems = [f"{type(err).__name__}: {err}"]
    if problems:
        warnings.warn(f"skipping result {path}: {'; '.join(problems)}", CorruptResultWarning, stacklevel=3)
        return None
    return samples


def load_samples(out_dir: str | Path, cells: Iterable[Cell | str] | None = None) -> pd.DataFrame:
    """One row per (cell, sample): ``cell, model, length, method, ratio, task, index, score`` (0-100).

    ``cells`` (``Cell`` objects or folder names, e.g. ``load_results(...).cell``) limits the folders read.
    """
    wanted = None if cells is None else {c.key if isinstance(c, Cell) else str(c) for c in cells}
    frames = []
    for path in sorted(Path(out_dir).glob(f"*/{RESULT}")):
        if wanted is not None and path.parent.name not in wanted:
            continue
        samples = read_cell(path)
        if samples is not None:
            frames.append(samples)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
