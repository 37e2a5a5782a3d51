"""RULER's metrics exactly as RULER and KVPress define them, and KVPress's prediction clean-up."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from .templates import task_family

_CONTROL = re.compile(r"[\x00-\x1f]")


def clean_prediction(text: str) -> str:
    """KVPress's clean-up: strip, *delete* control characters (newlines included), strip again."""
    return _CONTROL.sub("", str(text).strip()).strip()


def string_match_all(preds: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """Mean over samples of the fraction of references found (case-insensitive substring), x100, 2 dp."""
    if len(preds) == 0:
        raise ValueError("string_match_all: no predictions to score")
    total = sum(sum(1.0 if r.lower() in p.lower() else 0.0 for r in ref) / len(ref)
                for p, ref in zip(preds, refs, strict=True))
    return round(total / len(preds) * 100, 2)


def string_match_part(preds: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """Mean over samples of 1 if any reference is found (case-insensitive substring), x100, 2 dp."""
    if len(preds) == 0:
        raise ValueError("string_match_part: no predictions to score")
    total = sum(max(1.0 if r.lower() in p.lower() else 0.0 for r in ref) for p, ref in zip(preds, refs, strict=True))
    return round(total / len(preds) * 100, 2)


def metric_for(task: str):
    """KVPress's choice: ``string_match_part`` for qa tasks, ``string_match_all`` for the rest."""
    return string_match_part if task_family(task) == "qa" else string_match_all


def as_refs(value) -> list[str]:
    """A row's references as a list of str, also from the string repr a CSV round trip leaves."""
    if isinstance(value, str):
        import ast

        parsed = ast.literal_eval(value) if value.startswith("[") else [value]
        return [str(v) for v in parsed]
    return [str(v) for v in value]


def score(df: pd.DataFrame, prediction_column: str = "predicted_answer") -> dict[str, float]:
    """Per-task scores plus ``aggregate``, the unweighted mean over the tasks present.

    ``df`` needs ``task``, ``answer`` (list of str, or its string repr as in KVPress's CSV) and
    the prediction column; predictions are cleaned as KVPress does before matching.
    """
    missing = {"task", "answer", prediction_column} - set(df.columns)
    if missing:
        raise ValueError(f"cannot score: missing columns {sorted(missing)} (have {list(df.columns)})")
    if df.empty:
        raise ValueError("cannot score an empty table of predictions")
    scores: dict[str, float] = {}
    for task, rows in df.groupby("task", sort=False):
        preds = [clean_prediction(p) for p in rows[prediction_column].fillna("")]
        refs = [as_refs(a) for a in rows["answer"]]
        scores[str(task)] = metric_for(str(task))(preds, refs)
    scores["aggregate"] = round(sum(scores.values()) / len(scores), 2)
    return scores
