"""Prepared GPU check: the 8B-shaped latency measurement, appended to data/reference/latency_gpu.csv.

    python scripts/gpu_latency.py [--repeats 100] [--lengths 4096 8192]

Builds a Llama-3.1-8B-shaped model with random weights in bf16 (no hub needed), times the prefill of
no_press / SnapKV / ChunkKV / FRC at r = 0.88 (mean, std, median after warm-up, CUDA-synchronised), the
scoring-only time, and records each row with the date and the GPU's name. Also prints the scoring-overhead
ratios of benchmarks/press_overhead.py on the same model. Takes a few minutes on one H100/H200.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from cachecraft_lib.latency import compare_scoring, eight_b_shaped_llama, measure
from cachecraft_lib.prefill import SharedPrefill
from cachecraft_lib.presses import make_press

OUT = Path(__file__).resolve().parents[1] / "data" / "reference" / "latency_gpu.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--ratio", type=float, default=0.88)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this script is the GPU reference measurement")
    model = eight_b_shaped_llama("cuda")
    table = measure(model, "llama-3.1-8b-shaped (random weights)", args.lengths,
                    ["no_press", "snapkv", "chunkkv", "frc"], args.ratio, args.repeats)
    table.insert(0, "gpu", torch.cuda.get_device_name(0))
    table.insert(0, "date", time.strftime("%Y-%m-%d"))
    table["note"] = f"scripts/gpu_latency.py, torch {torch.__version__}"
    columns = pd.read_csv(args.out).columns if Path(args.out).exists() else table.columns
    table.reindex(columns=columns).to_csv(args.out, mode="a", header=not Path(args.out).exists(), index=False)
    print(table.drop(columns=["note"]).round(2).to_string(index=False))
    for length in args.lengths:
        ids = torch.randint(10, 120000, (1, length), device="cuda")
        shared = SharedPrefill(model, ids)
        presses = {m: make_press(m, args.ratio) for m in ("snapkv", "chunkkv", "frc")}
        med = {m: statistics.median(t) for m, t in compare_scoring(model, shared, presses, 50, 5).items()}
        print(f"{length}: scoring FRC/SnapKV {med['frc'] / med['snapkv']:.2f}x, FRC/ChunkKV {med['frc'] / med['chunkkv']:.2f}x")
        del shared


if __name__ == "__main__":
    main()
