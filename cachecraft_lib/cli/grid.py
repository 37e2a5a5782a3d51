"""``cachecraft grid``: the RULER grid of a profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..profiles import PROFILES


def _cmd_grid(args: argparse.Namespace) -> int:
    from ..grid import grid_cells, parse_shard, run_grid, select_shard
    from ..paths import results_dir
    from ..profiles import get_profile

    overrides = {k: v for k, v in {"lengths": args.lengths, "ratios": args.ratios,
                                   "samples_per_task": args.samples, "models": args.model}.items() if v}
    profile = get_profile(args.profile, **overrides)
    try:
        cells = grid_cells(profile, methods=args.methods, query_aware=args.query_aware)
        if args.shard:
            cells = select_shard(cells, *parse_shard(args.shard))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.batch_size is not None and args.batch_size < 1:
        print(f"error: --batch-size must be >= 1, got {args.batch_size}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else results_dir("grid", profile.name)
    print(f"cachecraft grid: {len(cells)} cells ({profile.label}) -> {out}")
    summary = run_grid(cells, out, progress=True, device=profile.device, dtype=profile.dtype,
                       batch_size=args.batch_size, decode=args.decode)
    cols = ["model", "length", "method", "ratio", "aggregate"]
    print(summary[cols].assign(model=summary.model.map(lambda m: Path(m).name)).to_string(index=False))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``grid``."""
    gr = sub.add_parser("grid", help="run (or resume) the RULER grid of a profile",
                        description="Compute every unfinished cell of the profile's grid: one result file per cell "
                                    "(plus KVPress's predictions.csv/metrics.json/config.yaml); resumable, shardable.")
    gr.add_argument("--profile", default="cpu", choices=sorted(PROFILES))
    gr.add_argument("--model", nargs="+", help="model names or paths, e.g. smollm2 (default: the profile's)")
    gr.add_argument("--methods", nargs="+", help="registry names (default: the profile's)")
    gr.add_argument("--ratios", type=float, nargs="+", help="compression ratios (default: the profile's)")
    gr.add_argument("--lengths", type=int, nargs="+", help="RULER lengths (default: the profile's)")
    gr.add_argument("--samples", type=int, help="samples per task (default: the profile's)")
    gr.add_argument("--query-aware", action=argparse.BooleanOptionalAction, default=None,
                    help="put the question inside the compressed context (default: the profile's, off)")
    gr.add_argument("--shard", metavar="i/n", help="run only shard i of n (0-based); shards merge by folder")
    gr.add_argument("--out", help="results folder (default data/results/grid/<profile>)")
    gr.add_argument("--batch-size", type=int, help="cells decoded together per sample (default: all of them on "
                                                   "CPU; what a third of the free GPU memory holds on CUDA)")
    gr.add_argument("--decode", choices=("batched", "serial"), default="batched",
                    help="batched: every cell of a sample in one batch (default); serial: one cell at a time "
                         "through KVPress's pipeline")
    gr.set_defaults(func=_cmd_grid)
