"""Step ``embedded`` (a): the embedded model in bfloat16 and float32, each cell's answers three ways, compared
sample by sample: the grid's batched engine, its serial engine (cell by cell) and KVPress's pipeline per cell
(its own prefill under the press, the method's question feed). In float32 all three must agree; in bfloat16
the agreement is reported (the engines round differently), cell by cell in ``cells.csv``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

GPU = dict(tasks=("niah_single_1", "niah_multikey_1", "vt", "qa_1"), samples=2, length=1024, max_new=12,
           methods=("snapkv", "frc", "chunkkv", "adasnapkv", "expected_attention", "finch"),
           dtypes=("bfloat16", "float32"))
# a CPU runs bf16 matmuls many times slower than float32: the stand-in checks the code path in float32 only
CPU = dict(tasks=("niah_single_1",), samples=1, methods=("snapkv", "frc"), length=512, max_new=4,
           dtypes=("float32",))
RATIO = 0.5


def _cells(size: dict) -> list:
    from cachecraft_lib.grid import Cell

    kw = dict(samples_per_task=size["samples"], ruler_source="offline", tasks=size["tasks"],
              max_new_tokens=size["max_new"])
    length = size["length"]
    return [Cell("tiny", length, "no_press", 0.0, **kw)] + [Cell("tiny", length, m, RATIO, **kw)
                                                            for m in size["methods"]]


def _grid_answers(cells: list, folder: Path, device: str, dtype: str, decode: str) -> dict[str, list[str]]:
    from cachecraft_lib.grid import run_grid

    run_grid(cells, folder, progress=False, device=device, dtype=dtype, decode=decode)
    out = {}
    for cell in cells:
        result = json.loads((folder / cell.key / "result.json").read_text())
        out[cell.method] = [p["predicted_answer"] for p in result["predictions"]]
    return out


def _pipeline_answers(cells: list, device: str, dtype: str, size: dict):
    """KVPress's pipeline per cell and sample (``Answerer``: the stock pipeline, or its token-by-token variant
    for the methods that need it), on the rows the grid loads."""
    from cachecraft_lib.models.loading import load_model
    from cachecraft_lib.models.pipeline import Answerer
    from cachecraft_lib.ruler import load

    model, tokenizer = load_model("tiny", device=device, dtype=dtype)
    answerer = Answerer(model, tokenizer)
    rows = load(size["length"], tokenizer, source="offline", samples_per_task=size["samples"], seed=42,
                tasks=size["tasks"])
    answers = {c.method: [answerer.answer(c.method, c.ratio, r.context, r.question, r.answer_prefix, size["max_new"])
                          for r in rows.itertuples()] for c in cells}
    return answers, list(rows.task)


def compare(work: Path, device: str, size: dict) -> pd.DataFrame:
    """One row per (dtype, method, sample): the three answers and whether they agree."""
    cells = _cells(size)
    frames = []
    for dtype in size["dtypes"]:
        start = time.time()
        batched = _grid_answers(cells, work / f"embedded_{dtype}_batched", device, dtype, "batched")
        serial = _grid_answers(cells, work / f"embedded_{dtype}_serial", device, dtype, "serial")
        pipeline, tasks = _pipeline_answers(cells, device, dtype, size)
        seconds = round(time.time() - start, 1)
        for method in pipeline:
            frames.append(pd.DataFrame({"dtype": dtype, "method": method, "sample": range(len(tasks)), "task": tasks,
                                        "batched": batched[method], "serial": serial[method],
                                        "pipeline": pipeline[method], "seconds_dtype": seconds}))
    table = pd.concat(frames, ignore_index=True)
    table["batched_eq_pipeline"] = table.batched == table.pipeline
    table["serial_eq_pipeline"] = table.serial == table.pipeline
    table["batched_eq_serial"] = table.batched == table.serial
    return table


def run(work: Path, scale: str) -> dict:
    import torch

    device = "cuda" if scale == "gpu" else "cpu"
    size = GPU if scale == "gpu" else CPU
    table = compare(work, device, size)
    table.to_csv(work / "cells.csv", index=False)
    agree = {dtype: {col: f"{int(g[col].sum())}/{len(g)}" for col in
                     ("batched_eq_pipeline", "serial_eq_pipeline", "batched_eq_serial")}
             for dtype, g in table.groupby("dtype")}
    fp32 = table[table.dtype == "float32"]
    differ = fp32[~(fp32.batched_eq_pipeline & fp32.serial_eq_pipeline)]
    bf16 = table[table.dtype == ("bfloat16" if "bfloat16" in size["dtypes"] else "float32")]
    by_method = {m: f"{int(g.batched_eq_pipeline.sum())}/{len(g)}" for m, g in bf16.groupby("method", sort=False)}
    if len(differ):
        verdict = (f"fail: float32 answers differ in {len(differ)} of {len(fp32)} (cell, sample): "
                   + ", ".join(sorted(set(differ.method))))
    else:
        verdict = "pass" if scale == "gpu" else "cpu scale (no CUDA): ran on the CPU; no GPU answers compared"
    return {"verdict": verdict, "device": device, "torch": torch.__version__, "agreement": agree,
            "bf16_batched_eq_pipeline_by_method": by_method, "answers": len(table), "size": size,
            "headline": "; ".join(f"{d} batched=pipeline {a['batched_eq_pipeline']}, serial=pipeline "
                                  f"{a['serial_eq_pipeline']}" for d, a in agree.items())}
