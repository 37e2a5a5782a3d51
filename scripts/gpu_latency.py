"""Prepared GPU check: the 8B-shaped latency measurement, appended to data/reference/latency_gpu.csv.

    python scripts/gpu_latency.py [--repeats 100] [--lengths 4096 8192]

Builds a Llama-3.1-8B-shaped model with random weights in bf16 (no hub needed), times the prefill of
no_press / SnapKV / ChunkKV / FRC at r = 0.88, interleaved round by round after warm-up (CUDA-synchronised;
median with its 95% interval, mean, std), the scoring-only time, and records each row with the date and the
GPU's name. Prints FRC's paired prefill and scoring ratios against the paper's ranges with a verdict
(reproduced / contradicted / inconclusive); every repeat goes to ``--samples-out``. A few minutes on one H100/H200.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from cachecraft_lib.latency import eight_b_shaped_llama, measure_samples, paper_comparison, ratios, summarise

OUT = Path(__file__).resolve().parents[1] / "data" / "reference" / "latency_gpu.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--ratio", type=float, default=0.88)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--samples-out", help="CSV of every timed repeat (default: beside --out)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this script is the GPU reference measurement")
    model = eight_b_shaped_llama("cuda")
    samples = measure_samples(model, "llama-3.1-8b-shaped (random weights)", args.lengths,
                              ["no_press", "snapkv", "chunkkv", "frc"], args.ratio, args.repeats)
    table = summarise(samples)
    stamp = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0)}
    table = table.assign(**stamp, note=f"scripts/gpu_latency.py, torch {torch.__version__}")
    columns = pd.read_csv(args.out).columns if Path(args.out).exists() else table.columns
    table.reindex(columns=columns).to_csv(args.out, mode="a", header=not Path(args.out).exists(), index=False)
    samples_out = Path(args.samples_out or Path(args.out).with_name(Path(args.out).stem + "_samples.csv"))
    samples.assign(**stamp).to_csv(samples_out, mode="a", header=not samples_out.exists(), index=False)
    print(table.drop(columns=["note"]).round(2).to_string(index=False))
    print(paper_comparison(samples).round(3).to_string(index=False))
    print("scoring alone, paired per round:")
    print(ratios(samples, "scoring_ms").round(3).to_string(index=False))


if __name__ == "__main__":
    main()
