"""How fast `train-tiny` gets its batches and takes its steps, with and without data worker processes.

    python benchmarks/train_throughput.py [--steps 20] [--first 10000] [--workers 2] [--device cpu|cuda]

Two measurements, each against its baseline (batches built in the training process) in one run:
1. batch building alone: batches/s and tokens/s in-process vs with ``--workers`` processes;
2. whole training steps (forward, backward, AdamW) on ``--device``, same two ways.
On two CPU cores the model needs both cores, so workers buy little there; beside a GPU, whose step
for this model takes milliseconds, batch building in one process is the bottleneck that workers
remove. Uses the shipped recipe's batches from step ``--first`` (the last refine cycle by default)
and a freshly built model of the shipped shape: nothing is written.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
from transformers import AutoTokenizer

from cachecraft_lib.profiles import PROFILES
from cachecraft_lib.tiny.batches import step_batches
from cachecraft_lib.tiny.recipe import Recipe
from cachecraft_lib.tiny.train import build_model, train_step


def batch_rate(tokenizer, recipe: Recipe, first: int, steps: int, workers: int) -> tuple[float, float]:
    """(batches/s, tokens/s) of building ``steps`` batches from step ``first`` (worker start-up included)."""
    started = time.perf_counter()
    tokens = sum(b["input_ids"].numel() for b in itertools.islice(step_batches(tokenizer, recipe, first, workers), steps))
    seconds = time.perf_counter() - started
    return steps / seconds, tokens / seconds


def step_rate(tokenizer, recipe: Recipe, first: int, steps: int, workers: int, device: str) -> float:
    """Training steps/s on ``device`` with batches from ``workers`` processes (first step excluded: warm-up):
    the trainer's own ``train_step``."""
    model = build_model(recipe, tokenizer).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    on_gpu = device.startswith("cuda")
    started = None
    for i, cpu_batch in enumerate(itertools.islice(step_batches(tokenizer, recipe, first, workers), steps + 1)):
        train_step(model, optimizer, {k: v.to(device) for k, v in cpu_batch.items()})
        if on_gpu:
            torch.cuda.synchronize()
        if i == 0:
            started = time.perf_counter()
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="steps timed per configuration")
    parser.add_argument("--first", type=int, default=10000, help="first step of the shipped recipe to draw")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(PROFILES["cpu"].models[0])
    recipe = Recipe()
    print(f"shipped recipe, steps {args.first}..{args.first + args.steps}, {torch.get_num_threads()} torch threads, "
          f"device {args.device}")
    base_b, base_t = batch_rate(tokenizer, recipe, args.first, args.steps, 0)
    fast_b, fast_t = batch_rate(tokenizer, recipe, args.first, args.steps, args.workers)
    print(f"batch building   in-process {base_b:6.2f} batches/s ({base_t / 1e3:6.1f}k tokens/s)   "
          f"{args.workers} workers {fast_b:6.2f} batches/s ({fast_t / 1e3:6.1f}k tokens/s)   ratio {fast_b / base_b:.2f}x")
    base_s = step_rate(tokenizer, recipe, args.first, args.steps, 0, args.device)
    fast_s = step_rate(tokenizer, recipe, args.first, args.steps, args.workers, args.device)
    print(f"training steps   in-process {base_s:6.2f} steps/s   {args.workers} workers {fast_s:6.2f} steps/s   "
          f"ratio {fast_s / base_s:.2f}x")


if __name__ == "__main__":
    main()
