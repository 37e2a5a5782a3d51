"""``cachecraft grid``: the RULER grid of a profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..profiles import PROFILES

LOCAL = "local"


def _cmd_grid(args: argparse.Namespace) -> int:
    if args.estimate:
        return _cmd_estimate(args)
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
    options = dict(device=profile.device, dtype=profile.dtype, batch_size=args.batch_size, decode=args.decode)
    if args.ray is None:
        summary = run_grid(cells, out, progress=True, **options)
    else:
        from ..grid.ray_runner import RayMissing, run_grid_ray

        print(f"on Ray ({'a local cluster' if args.ray == LOCAL else args.ray}): one task per (model, length) "
              f"group; {out} must be on a filesystem every worker sees")
        try:
            summary = run_grid_ray(cells, out, address=None if args.ray == LOCAL else args.ray,
                                   cpus_per_task=args.cpus_per_task, max_retries=args.max_retries, **options)
        except (RayMissing, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return _report(summary)


def _report(summary) -> int:
    """The finished cells' aggregates, then each failed cell with its reason (exit status 1 if any)."""
    if len(summary):
        cols = ["model", "length", "method", "ratio", "aggregate"]
        print(summary[cols].assign(model=summary.model.map(lambda m: Path(m).name)).to_string(index=False))
    failed = summary.attrs.get("failed", {})
    for key, reason in failed.items():
        print(f"failed: {key}: {reason}", file=sys.stderr)
    if failed:
        print(f"{len(failed)} cell(s) failed (reasons above and in their failed.json); the others are saved. "
              "Fix the cause and run the same command: only the missing cells run.", file=sys.stderr)
    return 1 if failed else 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    """The paper grid's GPU hours: measured by a GPU run of scripts/rehearse_paper.py where one is recorded
    (``grid.measured``), else the batched engine's roofline model, labelled as an estimate."""
    from ..grid import measured

    if args.gpus < 1:
        print(f"error: --gpus must be >= 1, got {args.gpus}", file=sys.stderr)
        return 2
    try:
        record = measured.load_measured(args.measured or measured.MEASURED)
    except measured.MeasurementError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if record is not None:
        print(measured.describe(record, args.gpus))
        if measured.paper_scale(record):
            return 0
        print()
    elif args.measured:
        print(f"error: no measurement at {args.measured} (scripts/rehearse_paper.py writes one)", file=sys.stderr)
        return 2
    else:
        print("no measured cost recorded yet (a GPU run of scripts/rehearse_paper.py writes "
              "docs/gpu_runs/paper_cost.json): the roofline estimate follows")
    return _roofline(args)


def _roofline(args: argparse.Namespace) -> int:
    """The paper grid's GPU hours from the batched engine's cost model (question side from offline RULER rows)."""
    from ..grid.cost import describe, paper_grid_estimate
    from ..models.loading import load_model
    from ..profiles import EMBEDDED_MODEL
    from ..ruler import load

    _, tokenizer = load_model(EMBEDDED_MODEL, device="cpu")
    rows = load(1024, tokenizer, source="offline", samples_per_task=2, seed=42)
    print("paper grid with the batched engine (a roofline estimate, not a measurement; question lengths from offline "
          "RULER rows and the embedded tokenizer):")
    print(describe(paper_grid_estimate(rows, tokenizer, gpus=tuple(sorted({1, args.gpus})))))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``grid``."""
    gr = sub.add_parser("grid", help="run (or resume) the RULER grid of a profile",
                        description="Compute every unfinished cell of the profile's grid: one result file per cell "
                                    "(plus KVPress's predictions.csv/metrics.json/config.yaml); resumable, shardable.")
    gr.add_argument("--profile", default="cpu", choices=sorted(PROFILES),
                    help="scale: smoke (CI, seconds), cpu (default), gpu (the embedded model on CUDA), "
                         "paper (the paper's models)")
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
    gr.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS",
                    help="run on Ray, one task per (model, length) group: alone, a local cluster on this machine; "
                         "with an address ('auto', 'ray://head:10001'), an existing cluster. Needs "
                         "pip install -e '.[ray]' and a results folder every worker sees")
    gr.add_argument("--cpus-per-task", type=float, default=1,
                    help="with --ray on CPUs: CPUs each group's task asks for (default 1; on CUDA a task asks "
                         "for one GPU)")
    gr.add_argument("--max-retries", type=int, default=3,
                    help="with --ray: times Ray re-runs a group whose worker died (it resumes from the store; "
                         "default 3)")
    gr.add_argument("--estimate", action="store_true",
                    help="print the paper grid's GPU hours and exit: measured by a GPU run of "
                         "scripts/rehearse_paper.py where one is recorded, else the roofline estimate, labelled")
    gr.add_argument("--gpus", type=int, default=4, help="with --estimate: the number of GPUs (default 4)")
    gr.add_argument("--measured", metavar="FILE", help="with --estimate: the rehearsal's record to read (default "
                                                       "docs/gpu_runs/paper_cost.json, if a GPU run wrote it)")
    gr.set_defaults(func=_cmd_grid)
