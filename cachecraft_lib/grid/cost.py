"""An estimate of what the ``paper`` grid costs on a GPU with the batched engine (an estimate, not a timing).

No GPU is reachable where this suite is developed, so the cost is modelled, per sample of one (model, length)
group: one prefill (compute-bound: 2 x params x L flops plus causal attention), every cell's compression
(a fixed overhead per cell and layer), then the question forward and the decode steps of each decode batch
(memory-bound: the weights plus every row's cache, padded to the batch's longest row, read once per step).
The batches are the engine's: rows sorted by kept length, as many per batch as ``decode.default_batch_size``
fits in a third of the memory left after the weights and the shared prefill. So what each cell keeps matters
only through the padding of its batch: at 4096 tokens all 31 rows fit in one batch padded to the uncompressed
row; at 8192 two batches, the compressed rows together in the first. The token counts (question tokens,
``max_new_tokens`` per task) come from the RULER rows given; each batch is assumed to run to its rows'
``max_new_tokens``, the worst case. The hardware figures are stated in ``Gpu`` and printed with the estimate.
Wall-clock hours for N GPUs are given two ways: spread evenly (``--shard`` processes) and with ``--ray``, whose
unit of work is one (model, length) group, so more GPUs than groups do not help.
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
    memory: float = 141e9  # bytes of HBM
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


def kept_fractions(ratios: tuple[float, ...], methods: int) -> list[float]:
    """The share of the context each cell's cache keeps: no_press keeps all, a method at ratio r keeps 1 - r."""
    return [1.0] + [1 - r for r in ratios for _ in range(methods)]


def rows_per_batch(shape: ModelShape, length: int, cells: int, gpu: Gpu = Gpu()) -> int:
    """Rows decoded together, as ``decode.default_batch_size`` picks them: a third of the memory left after
    the weights and the shared prefill, over twice the largest (uncompressed) row."""
    weights = shape.params * shape.bytes_per_value
    captured = shape.layers * length * shape.bytes_per_value * (shape.hidden + 2 * shape.kv_heads * shape.head_dim)
    free = max(gpu.memory - weights - captured, 0)
    return max(1, min(cells, int(free / 3 // (2 * length * shape.kv_bytes_per_token))))


def sample_seconds(shape: ModelShape, length: int, question_tokens: float, new_tokens: float,
                   kept: list[float], gpu: Gpu = Gpu()) -> dict[str, float]:
    """Modelled seconds of one sample (prefill, compression of every cell, question forward and decode of each
    batch), the number of decode batches and the padded share of the context they read per row."""
    cells = len(kept)
    prefill = (2 * shape.params * length + 2 * shape.layers * length ** 2 * shape.hidden) / gpu.flops
    compress = cells * shape.layers * gpu.press_overhead_s
    weights = shape.params * shape.bytes_per_value
    size = rows_per_batch(shape, length, cells, gpu)
    ordered = sorted(kept)
    batches = [ordered[i:i + size] for i in range(0, cells, size)]
    question = decode = padded = 0.0
    for batch in batches:
        read = weights + len(batch) * max(batch) * length * shape.kv_bytes_per_token  # padded to its longest row
        question += max(2 * shape.params * question_tokens * len(batch) / gpu.flops, read / gpu.bandwidth)
        decode += new_tokens * read / gpu.bandwidth
        padded += len(batch) * max(batch)
    return {"prefill_s": prefill, "compress_s": compress, "question_s": question, "decode_s": decode,
            "batches": len(batches), "padded_kept": padded / cells}


def paper_grid_estimate(rows: pd.DataFrame, tokenizer, ratios: tuple[float, ...] = (0.25, 0.5, 0.75, 0.8, 0.88),
                        methods: int = 6, samples: int = 6500, lengths: tuple[int, ...] = (4096, 8192),
                        gpu: Gpu = Gpu(), gpus: tuple[int, ...] = (1, 4, 8)) -> pd.DataFrame:
    """GPU hours of the ``paper`` grid (per model and length, and in total for 1..N GPUs), from ``rows``'
    question lengths and ``max_new_tokens`` (a RULER table of any length: the question side does not grow)."""
    question = float(pd.Series([len(tokenizer.encode(q + a, add_special_tokens=False))
                                for q, a in zip(rows.question, rows.answer_prefix, strict=True)]).mean())
    new = float(rows.groupby("task").max_new_tokens.first().mean())  # tasks weigh equally, as in RULER
    kept = kept_fractions(ratios, methods)
    cells = len(kept)
    out = []
    for shape in PAPER_SHAPES:
        for length in lengths:
            sec = sample_seconds(shape, length, question, new, kept, gpu)
            per_sample = sum(v for k, v in sec.items() if k.endswith("_s"))
            out.append({"model": shape.name, "length": length, "cells": cells, "samples": samples,
                        **{k: round(v, 3) for k, v in sec.items()}, "s_per_sample": round(per_sample, 2),
                        "gpu_hours": round(per_sample * samples / 3600, 1)})
    table = pd.DataFrame(out)
    total = table.gpu_hours.sum()
    table.attrs["summary"] = {f"{n} GPU(s)": round(total / n, 1) for n in gpus}
    table.attrs["ray"] = {f"{n} GPU(s)": round(makespan(list(table.gpu_hours), n), 1) for n in gpus}
    table.attrs["note"] = (f"estimate on {gpu.name}: question {question:.0f} tokens, {new:.0f} new tokens per "
                           f"sample (worst case), {cells} cells per sample decoded in batches that fit a third of the free "
                           f"{gpu.memory / 1e9:.0f} GB; 'spread evenly' assumes shards split every group "
                           "(--shard), '--ray' runs one task per (model, length) group")
    return table


def describe(table: pd.DataFrame) -> str:
    """The estimate as text: the table, the totals per number of GPUs and the assumptions."""
    lines = [table.to_string(index=False),
             "wall-clock hours, spread evenly: " + ", ".join(f"{k}: {v}" for k, v in table.attrs["summary"].items()),
             "wall-clock hours with --ray:     " + ", ".join(f"{k}: {v}" for k, v in table.attrs["ray"].items()),
             table.attrs["note"]]
    return "\n".join(lines)


def makespan(hours: list[float], gpus: int) -> float:
    """Hours until the last of ``hours`` (indivisible tasks) ends on ``gpus`` GPUs, longest task first."""
    loads = [0.0] * max(1, gpus)
    for h in sorted(hours, reverse=True):
        loads[loads.index(min(loads))] += h
    return max(loads)
