"""Grid throughput on the ``cpu`` profile: cells per hour, shared prefill against KVPress's pipeline.

    python benchmarks/grid_throughput.py [--samples 1] [--profile cpu]

Runs a slice of the profile's grid (one length, every method at r = 0.88, plus no compression) twice on
the same rows: once with the grid engine (one shared prefill per sample, each press applied to the
captured cache) and once the way KVPress's evaluate.py does it (the pipeline per cell, prefill included).
Prints seconds, cells per hour and the speed-up, and checks that both give the same answers.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from cachecraft_lib.grid import Cell, run_grid
from cachecraft_lib.models import load_model
from cachecraft_lib.pipeline import Answerer
from cachecraft_lib.profiles import get_profile
from cachecraft_lib.ruler import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--samples", type=int, default=1, help="samples per task for the benchmark slice")
    parser.add_argument("--ratio", type=float, default=0.88)
    args = parser.parse_args()
    profile = get_profile(args.profile)
    length = min(profile.lengths)
    common = dict(samples_per_task=args.samples, seed=profile.seed, ruler_source=profile.ruler_source,
                  tasks=profile.tasks, max_new_tokens=profile.max_new_tokens)
    cells = [Cell(profile.models[0], length, "no_press", 0.0, **common)] + [
        Cell(profile.models[0], length, m, args.ratio, **common) for m in profile.methods]

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        results = run_grid(cells, out, progress=False, device=profile.device, dtype=profile.dtype)
        engine = time.perf_counter() - start

    model, tok = load_model(profile.models[0], device=profile.device, dtype=profile.dtype)
    df = load(length, tok, source=profile.ruler_source, samples_per_task=args.samples, seed=profile.seed,
              tasks=profile.tasks)
    answerer = Answerer(model, tok)
    start = time.perf_counter()
    for cell in cells:
        for row in df.itertuples():
            answerer.answer(cell.method, cell.ratio, row.context, row.question, row.answer_prefix,
                            cell.max_new_tokens or row.max_new_tokens)
    baseline = time.perf_counter() - start

    n = len(cells)
    print(f"{profile.label}: {n} cells x {len(df)} samples at {length} tokens")
    print(f"  grid engine (shared prefill)   {engine:8.1f} s   {3600 * n / engine:8.1f} cells/hour")
    print(f"  KVPress pipeline per cell      {baseline:8.1f} s   {3600 * n / baseline:8.1f} cells/hour")
    print(f"  speed-up: {baseline / engine:.2f}x")
    full = len(results)
    print(f"  ({full} cells scored; the whole {profile.name} grid has "
          f"{len(profile.models) * len(profile.lengths) * (1 + len(profile.ratios) * len(profile.methods))} cells)")


if __name__ == "__main__":
    main()
