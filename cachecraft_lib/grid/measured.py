"""The paper grid's measured cost: what ``scripts/rehearse_paper.py`` timed, read back by ``cachecraft grid
--estimate``, which falls back to the roofline model (``grid.cost``) where no measurement exists.

The rehearsal runs the paper profile's grid (one sample per task, offline RULER) on models of the paper's shapes
with random weights, so every answer runs to its ``max_new_tokens``: its seconds per sample are an upper bound on
the real decode. A rehearsal on a CPU or at a down-scaled shape (``shape_scale`` < 1) checks the code path only;
``paper_scale`` tells the two apart, and the estimate says which it used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import REPO

MEASURED = REPO / "docs" / "gpu_runs" / "paper_cost.json"  # written by a GPU run of scripts/rehearse_paper.py
PAPER_SAMPLES = 6500  # per (model, length): 13 tasks x 500
GROUP_KEYS = ("model", "length", "cells", "samples", "seconds", "s_per_sample", "s_per_cell")


class MeasurementError(ValueError):
    """The measurement file is not one ``rehearse_paper.py`` wrote."""


def load_measured(path: str | Path = MEASURED) -> dict[str, Any] | None:
    """The rehearsal's record at ``path``, or None if there is none; a malformed file raises ``MeasurementError``
    saying what to do (never its contents)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        groups = data["groups"]
        ok = isinstance(groups, list) and groups and all(set(GROUP_KEYS) <= set(g) for g in groups)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise MeasurementError(f"{path.name} is not a rehearsal record (expected the JSON scripts/rehearse_paper.py "
                               "writes): run the rehearsal again or remove the file")
    return data


def paper_scale(data: dict[str, Any]) -> bool:
    """True for a rehearsal of the paper's full shapes on CUDA: a cost measurement, not a code-path check."""
    return float(data.get("shape_scale", 0)) == 1.0 and str(data.get("device", "")).startswith("cuda")


def gpu_hours(data: dict[str, Any], samples: int = PAPER_SAMPLES) -> list[dict[str, Any]]:
    """Per (model, length): measured seconds per sample and per cell, and the GPU hours of ``samples`` samples."""
    return [{**{k: g[k] for k in GROUP_KEYS}, "gpu_hours": round(g["s_per_sample"] * samples / 3600, 1)}
            for g in data["groups"]]


def describe(data: dict[str, Any], gpus: int = 1) -> str:
    """The measured estimate as text, labelled with where and when it was measured."""
    import pandas as pd

    table = pd.DataFrame(gpu_hours(data))
    table["model"] = table.model.map(lambda m: str(m).split("/")[-1])
    total = float(table.gpu_hours.sum())
    where = f"measured on {data.get('measured_on', '?')}, {data.get('device_name', data.get('device', '?'))}"
    kind = ("" if paper_scale(data) else
            f" -- a rehearsal at shape scale {data.get('shape_scale')} on {data.get('device')}: a code-path check, "
            "not the paper's cost")
    lines = [f"paper grid, {where}{kind}:", table.to_string(index=False),
             f"total: {total:.1f} GPU-hours for {PAPER_SAMPLES} samples per (model, length); "
             + ", ".join(f"{n} GPU(s): {total / n:.1f} h" for n in sorted({1, gpus})),
             f"({data.get('samples_per_task', 1)} sample(s) per task, {data.get('tokenizer', '?')} tokenizer, "
             "random weights: every answer runs to its max_new_tokens, an upper bound on the decode)"]
    return "\n".join(lines)
