"""FRC's own scoring + selection cost against SnapKV's and ChunkKV's, on the same captured prefill inputs.

    python benchmarks/press_overhead.py [--lengths 1024 2048] [--repeats 30] [--model tiny|8b-shaped]

Prints, per context length, the median time of each press's ``compress`` over all layers (scoring,
selection and gather, no prefill) and the ratios FRC/SnapKV and FRC/ChunkKV. Target (issue 8): FRC at
most 1.10x SnapKV and below ChunkKV. ``--model 8b-shaped`` (GPU) uses Llama-3.1-8B's shapes with random
weights.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from cachecraft_lib.methods.registry import make_press
from cachecraft_lib.models.loading import load_model
from cachecraft_lib.models.prefill import SharedPrefill
from cachecraft_lib.paper.latency import compare_scoring, eight_b_shaped_llama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--ratio", type=float, default=0.88)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--model", default="tiny", help="tiny (CPU default) or 8b-shaped (GPU)")
    args = parser.parse_args()

    if args.model == "8b-shaped":
        model = eight_b_shaped_llama("cuda")
    else:
        model, _ = load_model(args.model)
    print(f"model {args.model} on {model.device}, r = {args.ratio}, median of {args.repeats} runs")
    print(f"{'length':>7} {'snapkv ms':>10} {'chunkkv ms':>11} {'frc ms':>8} {'frc/snapkv':>11} {'frc/chunkkv':>12}")
    gen = torch.Generator().manual_seed(0)
    for length in args.lengths:
        ids = torch.randint(10, model.config.vocab_size - 10, (1, length), generator=gen).to(model.device)
        shared = SharedPrefill(model, ids)
        presses = {m: make_press(m, args.ratio) for m in ("snapkv", "chunkkv", "frc")}
        times = compare_scoring(model, shared, presses, args.repeats, warmup=5)
        med = {m: statistics.median(t) * 1000 for m, t in times.items()}
        print(f"{length:>7} {med['snapkv']:>10.2f} {med['chunkkv']:>11.2f} {med['frc']:>8.2f} "
              f"{med['frc'] / med['snapkv']:>10.2f}x {med['frc'] / med['chunkkv']:>11.2f}x")


if __name__ == "__main__":
    main()
