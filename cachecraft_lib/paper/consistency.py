"""Consistency checks the notebooks show: the RULER scorer (00), FRCPress against FRC's policy program (02).

Each returns a small table (or dict) to display and record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..methods.registry import FRCPress, PolicyPress
from ..ruler import score
from ..ruler.stats import oracle_scores


def scorer_bounds(tables: Mapping[int, pd.DataFrame]) -> dict[int, dict[str, float]]:
    """Per context length, the RULER aggregate of perfect answers and of empty ones.

    Perfect answers must score 100 on every task (else the data and the scorer disagree, and every later
    number would be wrong): raises ``ValueError`` naming the tasks that do not.
    """
    checks = {}
    for length, df in tables.items():
        oracle = oracle_scores(df)
        wrong = {task: v for task, v in oracle.items() if v != 100.0}
        if wrong:
            raise ValueError(f"RULER {length}: perfect answers score {wrong}, not 100; the data and the scorer "
                             "disagree (regenerate the data, or fix the task's scorer)")
        empty = score(df.assign(predicted_answer=""))
        checks[length] = {"oracle": oracle["aggregate"], "empty": empty["aggregate"]}
    return checks


def frc_press_matches_program(model: Any, input_ids: torch.Tensor, program: str | Path,
                              ratios: Iterable[float]) -> pd.DataFrame:
    """Per ratio: do ``FRCPress`` (the paper's rule, no forced last chunk) and the FRC policy ``program`` run
    through ``PolicyPress`` keep identical indices on every layer of one prefill of ``input_ids``?"""
    rows = []
    for ratio in ratios:
        press, policy = FRCPress(ratio, keep_last=False, record=True), PolicyPress(program, ratio, record=True)
        for p in (press, policy):
            with torch.no_grad(), p(model):
                model.model(input_ids=input_ids)
        same = press.kept.keys() == policy.kept.keys() and all(
            torch.equal(press.kept[k], policy.kept[k]) for k in press.kept)
        rows.append({"ratio": ratio, "layers": len(press.kept), "kept_tokens": len(press.kept[0]), "identical": same})
    return pd.DataFrame(rows)
