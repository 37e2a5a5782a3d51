"""Grid throughput: the batched engine against today's cell-by-cell engine and KVPress's pipeline per cell.

    python benchmarks/grid_throughput.py [--slice r088|full] [--length 1024] [--samples 1] [--profile cpu]
        [--samples-per-decode N] [--pipeline-budget-s S] [--json OUT.json]

On the same RULER rows and in one run it computes a slice of the profile's grid three ways:
  batched   one shared prefill per sample, the cells' caches of several samples decoded together (``run_grid``,
            the default; ``--samples-per-decode 1``: one sample's cells per decode, the engine before)
  serial    one shared prefill per sample, each cell decoded alone (``run_grid(decode="serial")``)
  pipeline  the way KVPress's evaluate.py runs it: the pipeline per cell, prefill included
Slices: ``r088`` = every method at r = 0.88 plus no compression (7 cells on the cpu profile); ``full`` = every
method x ratio plus no compression at one length (31 cells). Prints cells/hour, both speed-ups, and the
number of answers of the batched engine that differ from KVPress's pipeline (expected 0; any that differ are
printed with the cell and the sample); ``--pipeline-budget-s`` stops the pipeline after that many seconds (its
answers taken in a seeded random order) and extrapolates its time from the answers it gave, on which the
answers are compared. ``--json`` writes the numbers (``scripts/gpu_check.sh`` reads them). Ends with an estimate of the ``paper`` grid's GPU hours with the
batched engine (``grid.cost``): measured token counts of this run, per-token GPU costs from a roofline model.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch

from cachecraft_lib.grid import Cell, run_grid
from cachecraft_lib.grid.cost import describe, paper_grid_estimate
from cachecraft_lib.models.loading import load_model
from cachecraft_lib.models.pipeline import Answerer
from cachecraft_lib.profiles import get_profile
from cachecraft_lib.ruler import load


def slice_cells(profile, length: int, samples: int, which: str) -> list[Cell]:
    common = dict(samples_per_task=samples, seed=profile.seed, ruler_source=profile.ruler_source,
                  tasks=profile.tasks, max_new_tokens=profile.max_new_tokens)
    model = profile.models[0]
    ratios = [0.88] if which == "r088" else list(profile.ratios)
    return [Cell(model, length, "no_press", 0.0, **common)] + [
        Cell(model, length, m, r, **common) for m in profile.methods for r in ratios]


def engine_answers(cells: list[Cell], decode: str, device: str, dtype: str,
                   samples_per_decode: int | None = None) -> tuple[float, dict]:
    """Seconds for the whole slice and every answer, {(cell key, index): answer}."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run_grid(cells, out, progress=False, device=device, dtype=dtype, decode=decode,
                 samples_per_decode=samples_per_decode)
        seconds = time.perf_counter() - start
        answers = {}
        for cell in cells:
            result = json.loads((Path(out) / cell.key / "result.json").read_text())
            answers.update({(cell.key, p["index"]): p["predicted_answer"] for p in result["predictions"]})
    return seconds, answers


def pipeline_answers(cells: list[Cell], df, answerer: Answerer, budget_s: float | None = None) -> tuple[float, dict]:
    """KVPress's pipeline per (cell, sample); with ``budget_s``, in a seeded random order until the budget is
    spent, the time extrapolated to every pair from the answers given."""
    pairs = [(cell, i) for cell in cells for i in range(len(df))]
    if budget_s is not None:
        random.Random(0).shuffle(pairs)
    answers = {}
    start = time.perf_counter()
    for cell, i in pairs:
        row = df.iloc[i]
        answers[(cell.key, i)] = answerer.answer(cell.method, cell.ratio, row.context, row.question,
                                                 row.answer_prefix, cell.max_new_tokens or row.max_new_tokens)
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
    return (time.perf_counter() - start) * len(pairs) / len(answers), answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--slice", choices=("r088", "full"), default="full")
    parser.add_argument("--length", type=int, default=None, help="context length (default: the profile's shortest)")
    parser.add_argument("--samples", type=int, default=1, help="samples per task for the benchmark slice")
    parser.add_argument("--skip-serial", action="store_true", help="leave out today's cell-by-cell engine")
    parser.add_argument("--samples-per-decode", type=int, help="samples whose rows are decoded together (default: "
                        "by free memory on CUDA, grid.batches.CPU_SAMPLES on a CPU)")
    parser.add_argument("--compare-per-sample", action="store_true",
                        help="also time the batched engine with one sample per decode (the engine before)")
    parser.add_argument("--pipeline-budget-s", type=float, help="stop KVPress's pipeline after this many seconds "
                        "and extrapolate (default: run it on every pair)")
    parser.add_argument("--json", help="write the measured numbers to this file")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    length = args.length or min(profile.lengths)
    cells = slice_cells(profile, length, args.samples, args.slice)
    torch.manual_seed(0)

    batched_s, batched = engine_answers(cells, "batched", profile.device, profile.dtype, args.samples_per_decode)
    per_sample_s, per_sample = (engine_answers(cells, "batched", profile.device, profile.dtype, 1)
                                if args.compare_per_sample else (None, None))
    serial_s, serial = (None, None) if args.skip_serial else engine_answers(cells, "serial", profile.device,
                                                                            profile.dtype)
    model, tok = load_model(profile.models[0], device=profile.device, dtype=profile.dtype)
    df = load(length, tok, source=profile.ruler_source, samples_per_task=args.samples, seed=profile.seed,
              tasks=profile.tasks)
    pipe_s, piped = pipeline_answers(cells, df, Answerer(model, tok), args.pipeline_budget_s)

    n = len(cells)
    print(f"{profile.label}: slice {args.slice}, {n} cells x {len(df)} samples at {length} tokens")
    print(f"  batched engine              {batched_s:8.1f} s   {3600 * n / batched_s:8.1f} cells/hour")
    if per_sample_s is not None:
        print(f"  batched, one sample/decode  {per_sample_s:8.1f} s   {3600 * n / per_sample_s:8.1f} cells/hour")
    if serial_s is not None:
        print(f"  cell-by-cell engine         {serial_s:8.1f} s   {3600 * n / serial_s:8.1f} cells/hour")
    print(f"  KVPress pipeline per cell   {pipe_s:8.1f} s   {3600 * n / pipe_s:8.1f} cells/hour"
          + (f" (extrapolated from {len(piped)} of {n * len(df)} answers)" if len(piped) < n * len(df) else ""))
    print(f"  speed-up of batched: {pipe_s / batched_s:.2f}x KVPress's pipeline"
          + (f", {serial_s / batched_s:.2f}x the cell-by-cell engine" if serial_s else ""))
    differ = [k for k in piped if piped[k] != batched[k]]
    print(f"  answers that differ from KVPress's pipeline: {len(differ)} of {len(piped)}")
    for key, i in differ:
        print(f"    {key} sample {i}: pipeline {piped[(key, i)]!r} vs batched {batched[(key, i)]!r}")
    if serial is not None:
        print(f"  answers that differ between batched and cell-by-cell: {sum(serial[k] != batched[k] for k in serial)}")
    if per_sample is not None:
        print(f"  answers that differ between decoding across samples and sample by sample: "
              f"{sum(per_sample[k] != batched[k] for k in per_sample)}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "profile": profile.name, "device": str(profile.device), "dtype": profile.dtype, "cells": n,
            "samples": len(df), "length": length, "batched_s": round(batched_s, 2), "pipeline_s": round(pipe_s, 2),
            "pipeline_answers": len(piped), "ratio": round(pipe_s / batched_s, 2), "differ": len(differ),
            "per_sample_s": None if per_sample_s is None else round(per_sample_s, 2),
            "serial_s": None if serial_s is None else round(serial_s, 2)}, indent=1))
    print()
    print("paper grid with the batched engine (an estimate, not a measurement):")
    print(describe(paper_grid_estimate(df, tok)))


if __name__ == "__main__":
    main()
