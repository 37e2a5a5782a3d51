"""Grid throughput: the batched engine against today's cell-by-cell engine and KVPress's pipeline per cell.

    python benchmarks/grid_throughput.py [--slice r088|full] [--length 1024] [--samples 1] [--profile cpu]

On the same RULER rows and in one run it computes a slice of the profile's grid three ways:
  batched   one shared prefill per sample, every cell's cache decoded together (``run_grid``, the default)
  serial    one shared prefill per sample, each cell decoded alone (``run_grid(decode="serial")``)
  pipeline  the way KVPress's evaluate.py runs it: the pipeline per cell, prefill included
Slices: ``r088`` = every method at r = 0.88 plus no compression (7 cells on the cpu profile); ``full`` = every
method x ratio plus no compression at one length (31 cells). Prints cells/hour, both speed-ups, and the
number of answers of the batched engine that differ from KVPress's pipeline (expected 0; any that differ are
printed with the cell and the sample). Ends with an estimate of the ``paper`` grid's GPU hours with the
batched engine (``grid.cost``): measured token counts of this run, per-token GPU costs from a roofline model.
"""

from __future__ import annotations

import argparse
import json
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


def engine_answers(cells: list[Cell], decode: str, device: str, dtype: str) -> tuple[float, dict]:
    """Seconds for the whole slice and every answer, {(cell key, index): answer}."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run_grid(cells, out, progress=False, device=device, dtype=dtype, decode=decode)
        seconds = time.perf_counter() - start
        answers = {}
        for cell in cells:
            result = json.loads((Path(out) / cell.key / "result.json").read_text())
            answers.update({(cell.key, p["index"]): p["predicted_answer"] for p in result["predictions"]})
    return seconds, answers


def pipeline_answers(cells: list[Cell], df, answerer: Answerer) -> tuple[float, dict]:
    answers = {}
    start = time.perf_counter()
    for cell in cells:
        for i, row in enumerate(df.itertuples()):
            answers[(cell.key, i)] = answerer.answer(cell.method, cell.ratio, row.context, row.question,
                                                     row.answer_prefix, cell.max_new_tokens or row.max_new_tokens)
    return time.perf_counter() - start, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--slice", choices=("r088", "full"), default="full")
    parser.add_argument("--length", type=int, default=None, help="context length (default: the profile's shortest)")
    parser.add_argument("--samples", type=int, default=1, help="samples per task for the benchmark slice")
    parser.add_argument("--skip-serial", action="store_true", help="leave out today's cell-by-cell engine")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    length = args.length or min(profile.lengths)
    cells = slice_cells(profile, length, args.samples, args.slice)
    torch.manual_seed(0)

    batched_s, batched = engine_answers(cells, "batched", profile.device, profile.dtype)
    serial_s, serial = (None, None) if args.skip_serial else engine_answers(cells, "serial", profile.device,
                                                                            profile.dtype)
    model, tok = load_model(profile.models[0], device=profile.device, dtype=profile.dtype)
    df = load(length, tok, source=profile.ruler_source, samples_per_task=args.samples, seed=profile.seed,
              tasks=profile.tasks)
    pipe_s, piped = pipeline_answers(cells, df, Answerer(model, tok))

    n = len(cells)
    print(f"{profile.label}: slice {args.slice}, {n} cells x {len(df)} samples at {length} tokens")
    print(f"  batched engine              {batched_s:8.1f} s   {3600 * n / batched_s:8.1f} cells/hour")
    if serial_s is not None:
        print(f"  cell-by-cell engine         {serial_s:8.1f} s   {3600 * n / serial_s:8.1f} cells/hour")
    print(f"  KVPress pipeline per cell   {pipe_s:8.1f} s   {3600 * n / pipe_s:8.1f} cells/hour")
    print(f"  speed-up of batched: {pipe_s / batched_s:.2f}x KVPress's pipeline"
          + (f", {serial_s / batched_s:.2f}x the cell-by-cell engine" if serial_s else ""))
    differ = [k for k in piped if piped[k] != batched[k]]
    print(f"  answers that differ from KVPress's pipeline: {len(differ)} of {len(piped)}")
    for key, i in differ:
        print(f"    {key} sample {i}: pipeline {piped[(key, i)]!r} vs batched {batched[(key, i)]!r}")
    if serial is not None:
        print(f"  answers that differ between batched and cell-by-cell: {sum(serial[k] != batched[k] for k in serial)}")
    print()
    print("paper grid with the batched engine (an estimate, not a measurement):")
    print(describe(paper_grid_estimate(df, tok)))


if __name__ == "__main__":
    main()
