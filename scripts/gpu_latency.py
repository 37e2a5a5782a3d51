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

import torch

from cachecraft_lib.paper.latency import (
    append_table,
    eight_b_shaped_llama,
    measure_samples,
    paper_comparison,
    ratios,
    summarise,
)

OUT = Path(__file__).resolve().parents[1] / "data" / "reference" / "latency_gpu.csv"
MIN_REPEATS = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--ratio", type=float, default=0.88)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--samples-out", help="CSV of every timed repeat (default: beside --out)")
    parser.add_argument("--layers", type=int, help="fewer layers (a quick check; the reference uses all 32)")
    parser.add_argument("--device", default="cuda", help="cpu runs the same steps (slowly; for checking the script)")
    args = parser.parse_args()
    if args.repeats < MIN_REPEATS:  # the interval of a median over fewer repeats supports no verdict
        parser.error(f"--repeats {args.repeats}: at least {MIN_REPEATS} for an interval and a verdict")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this script is the GPU reference measurement (--device cpu to check it)")
    model = eight_b_shaped_llama(args.device, layers=args.layers)
    samples = measure_samples(model, "llama-3.1-8b-shaped (random weights)", args.lengths,
                              ["no_press", "snapkv", "chunkkv", "frc"], args.ratio, args.repeats)
    table = summarise(samples)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (cpu)"
    stamp = {"date": time.strftime("%Y-%m-%d"), "gpu": gpu}
    table = table.assign(**stamp, note=f"scripts/gpu_latency.py, torch {torch.__version__}")
    append_table(table, args.out)  # every column kept (peak_mb, device, the scoring columns)
    samples_out = Path(args.samples_out or Path(args.out).with_name(Path(args.out).stem + "_samples.csv"))
    append_table(samples.assign(**stamp), samples_out)
    print(table.drop(columns=["note"]).round(2).to_string(index=False))
    print(paper_comparison(samples).round(3).to_string(index=False))
    print("scoring alone, paired per round:")
    print(ratios(samples, "scoring_ms").round(3).to_string(index=False))


if __name__ == "__main__":
    main()
