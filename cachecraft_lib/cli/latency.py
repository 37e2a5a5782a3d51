"""``cachecraft latency``: prefill timing per method."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..profiles import PROFILES


def _cmd_latency(args: argparse.Namespace) -> int:
    from ..models.loading import load_model
    from ..paper.latency import eight_b_shaped_llama, measure_samples, paper_comparison, save, summarise
    from ..paths import DATA
    from ..profiles import get_profile

    profile = get_profile(args.profile)
    if args.model == "8b-shaped":
        import torch

        if not torch.cuda.is_available():
            print("error: --model 8b-shaped needs a CUDA GPU (an 8B model on CPU would take minutes per prefill)",
                  file=sys.stderr)
            return 2
        model, name = eight_b_shaped_llama("cuda"), "llama-3.1-8b-shaped (random weights)"
    else:
        model, _ = load_model(args.model or profile.models[0], device=profile.device, dtype=profile.dtype)
        name = Path(args.model or profile.models[0]).name
    samples = measure_samples(model, name, args.lengths or profile.latency_lengths, args.methods, args.ratio,
                              args.repeats or profile.latency_repeats, warmup=args.warmup)
    table = summarise(samples)
    out = Path(args.out) if args.out else DATA / "results" / "latency" / profile.name
    path = save(table, out, meta={"profile": profile.name, "model": name, "ratio": args.ratio}, samples=samples)
    cols = ["length", "method", "median_ms", "median_lo_ms", "median_hi_ms", "mean_ms", "std_ms",
            "scoring_median_ms", "peak_mb"]
    print(table[cols].round(2).to_string(index=False))
    comparison = paper_comparison(samples)
    if len(comparison):
        print(comparison[["length", "ratio", "here", "lo", "hi", "paper_low", "paper_high", "verdict"]]
              .round(3).to_string(index=False))
    print(f"written to {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``latency``."""
    la = sub.add_parser("latency", help="time the prefill (compression included) per method",
                        description="Prefill wall clock (median with its 95% interval over repeats, mean, std; methods "
                                    "interleaved round by round after warm-up), the press's own scoring time and peak "
                                    "memory, per method and context length; FRC's paired ratios against the paper's.")
    la.add_argument("--profile", default="cpu", choices=sorted(PROFILES),
                    help="scale: smoke (CI, seconds), cpu (default), gpu (the embedded model on CUDA), "
                         "paper (the paper's models)")
    la.add_argument("--model", help="model name or path (default: the profile's), or 8b-shaped on a GPU")
    la.add_argument("--methods", nargs="+", default=["no_press", "snapkv", "chunkkv", "frc"],
                    help="registry names (default: no_press snapkv chunkkv frc)")
    la.add_argument("--lengths", type=int, nargs="+", help="context lengths (default: the profile's)")
    la.add_argument("--ratio", type=float, default=0.88, help="compression ratio, the fraction evicted (default 0.88)")
    la.add_argument("--repeats", type=int, help="timed runs (default: the profile's)")
    la.add_argument("--warmup", type=int, default=2, help="untimed runs per method before timing (default 2)")
    la.add_argument("--out", help="folder for latency.csv/json (default data/results/latency/<profile>)")
    la.set_defaults(func=_cmd_latency)
