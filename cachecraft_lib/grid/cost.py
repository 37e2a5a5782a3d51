"""An estimate of what the ``paper`` grid costs on a GPU with the batched engine (an estimate, not a timing).

No GPU is reachable where this suite is developed, so the cost is modelled, per sample of one (model, length)
group: one prefill (compute-bound: 2 x params x L flops plus causal attention), every cell's compression
(a fixed overhead per cell and layer), the question forward, and the decode steps of one batch of all cells
(memory-bound: the weights plus every row's cache, padded to the longest row, read once per step). The token
counts (question tokens, ``max_new_tokens`` per task) come from the RULER rows given; the batch is assumed to
run to the row's ``max_new_tokens`` (its longest row), which is the worst case. The hardware figures are
stated in ``Gpu`` and printed with the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Gpu:
    """Sustained rates assumed for one GPU (H200 datasheet figures, derated)."""

    name: str = "H200 (bf16)"
    flops: float = 989e12 * 0.4  # dense bf16, 40% utilisation in prefill
    bandwidth: float = 4.8e12 * 0.7  # HBM bytes/s, 70% sustained in decoding
    press_overhead_s: float = 0.5e-3  # per cell and layer: scoring, top-k, gather, Python


@dataclass(frozen=True)
class ModelShape:
    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    hidden: int
    bytes_per_value: int = 2

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value


PAPER_SHAPES = (ModelShape("Llama-3.1-8B-Instruct", 8.0e9, 32, 8, 128, 4096),
                ModelShape("Qwen3-8B", 8.2e9, 36, 8, 128, 4096))


def sample_seconds(shape: ModelShape, length: int, question_tokens: float, new_tokens: float, cells: int,
                   mean_kept: float, gpu: Gpu = Gpu()) -> dict[str, float]:
    """Modelled seconds of one sample: prefill, compression of every cell, question forward, batched decode."""
    prefill = (2 * shape.params * length + 2 * shape.layers * length ** 2 * shape.hidden) / gpu.flops
    compress = cells * shape.layers * gpu.press_overhead_s
    weights = shape.params * shape.bytes_per_value
    padded_cache = cells * length * shape.kv_bytes_per_token  # one batch, padded to the uncompressed row
    question = max(2 * shape.params * question_tokens * cells / gpu.flops, (weights + padded_cache) / gpu.bandwidth)
    step = (weights + padded_cache) / gpu.bandwidth
    return {"prefill_s": prefill, "compress_s": compress, "question_s": question, "decode_s": new_tokens * step,
            "mean_kept": mean_kept}


def paper_grid_estimate(rows: pd.DataFrame, tokenizer, ratios: tuple[float, ...] = (0.25, 0.5, 0.75, 0.8, 0.88),
                        methods: int = 6, samples: int = 6500, lengths: tuple[int, ...] = (4096, 8192),
                        gpu: Gpu = Gpu(), gpus: tuple[int, ...] = (1, 4, 8)) -> pd.DataFrame:
    """GPU hours of the ``paper`` grid (per model and length, and in total for 1..N GPUs), from ``rows``'
    question lengths and ``max_new_tokens`` (a RULER table of any length: the question side does not grow)."""
    question = float(pd.Series([len(tokenizer.encode(q + a, add_special_tokens=False))
                                for q, a in zip(rows.question, rows.answer_prefix, strict=True)]).mean())
    new = float(rows.groupby("task").max_new_tokens.first().mean())  # tasks weigh equally, as in RULER
    cells = 1 + methods * len(ratios)
    kept = (1 + methods * sum(1 - r for r in ratios)) / cells
    out = []
    for shape in PAPER_SHAPES:
        for length in lengths:
            sec = sample_seconds(shape, length, question, new, cells, kept, gpu)
            per_sample = sum(v for k, v in sec.items() if k.endswith("_s"))
            out.append({"model": shape.name, "length": length, "cells": cells, "samples": samples,
                        **{k: round(v, 3) for k, v in sec.items()}, "s_per_sample": round(per_sample, 2),
                        "gpu_hours": round(per_sample * samples / 3600, 1)})
    table = pd.DataFrame(out)
    total = table.gpu_hours.sum()
    table.attrs["summary"] = {f"{n} GPU(s)": round(total / n, 1) for n in gpus}
    table.attrs["note"] = (f"estimate on {gpu.name}: question {question:.0f} tokens, {new:.0f} new tokens per "
                           f"sample (worst case), {cells} cells per batch; wall-clock hours for N GPUs assume "
                           "(model, length) groups and shards spread evenly")
    return table


def describe(table: pd.DataFrame) -> str:
    """The estimate as text: the table, the totals per number of GPUs and the assumptions."""
    lines = [table.to_string(index=False), "total wall-clock hours: " + ", ".join(
        f"{k}: {v}" for k, v in table.attrs["summary"].items()), table.attrs["note"]]
    return "\n".join(lines)
