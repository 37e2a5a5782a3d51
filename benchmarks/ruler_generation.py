"""Time offline RULER generation (13 tasks x N samples) against a baseline of tokenising its output once.

    python benchmarks/ruler_generation.py [--length 4096] [--samples 500] [--tokenizer PATH]

The target (issue 3): 13 x 500 samples at 4096 tokens in under two minutes on one core with a fast
tokenizer. The ratio says how many tokenisations of each prompt the length fit costs on average.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one core for the Rust tokenizer too
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cachecraft_lib.paths import MODELS  # noqa: E402
from cachecraft_lib.ruler import generate  # noqa: E402
from cachecraft_lib.ruler.tokens import HFTokenCounter  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--tokenizer", default=str(MODELS / "tiny-ruler-llama"))
    args = parser.parse_args()

    count = HFTokenCounter(args.tokenizer)
    start = time.perf_counter()
    df = generate(args.length, count, samples_per_task=args.samples, progress=True)
    generation = time.perf_counter() - start

    start = time.perf_counter()
    for c, q, a in zip(df.context, df.question, df.answer_prefix, strict=True):
        count(c + q + a)
    baseline = time.perf_counter() - start

    print(f"RULER {args.length}: {len(df)} rows ({df.task.nunique()} tasks x {args.samples}) with {count.name}")
    print(f"  generation           {generation:8.1f} s  ({len(df) / generation:.0f} rows/s)")
    print(f"  baseline (tokenise)  {baseline:8.1f} s")
    print(f"  ratio generation / baseline: {generation / baseline:.2f}x")
    print(f"  target < 120 s: {'met' if generation < 120 else 'NOT met'}")


if __name__ == "__main__":
    main()
