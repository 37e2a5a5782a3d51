"""``cachecraft train-tiny`` and ``tiny-card``: the embedded model."""

from __future__ import annotations

import argparse
import json
import sys

from ..profiles import PROFILES


def _cmd_train_tiny(args: argparse.Namespace) -> int:
    from ..tiny.recipe import Recipe, load_recipe, recipe_json
    from ..tiny.train import train

    try:
        recipe = load_recipe(args.recipe) if args.recipe else Recipe()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.steps:
        recipe = recipe.scaled(args.steps)
    if args.print_recipe:
        print(json.dumps(recipe_json(recipe), indent=2))
        return 0
    try:
        out = train(args.out, recipe, resume=not args.fresh, save_every=args.save_every, threads=args.threads,
                    max_minutes=args.max_minutes, device=args.device, workers=args.workers)
    except ValueError as err:  # a checkpoint written by another recipe: nothing trained, nothing lost
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"weights in {out}")
    return 0


def _cmd_tiny_card(args: argparse.Namespace) -> int:
    from ..tiny.card import build_card

    path = build_card(args.model, tuple(args.lengths), args.samples, heldout_samples=args.heldout_samples)
    print(f"model card written to {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the embedded model's verbs."""
    t = sub.add_parser("train-tiny", help="train the embedded tiny model from scratch (resumable)",
                       description="Train the embedded GQA Llama on offline RULER; resumes from the last checkpoint, "
                                   "also under a longer recipe that trains every finished step the same way "
                                   "(a refine cycle appended).")
    t.add_argument("--out", default=str(PROFILES["cpu"].models[0]), help="model folder (default: the shipped one)")
    t.add_argument("--steps", type=int, help="total optimisation steps (default: the recipe's)")
    t.add_argument("--fresh", action="store_true", help="ignore existing checkpoints and start over")
    t.add_argument("--save-every", type=int, default=100, help="checkpoint interval in steps (default 100)")
    t.add_argument("--threads", type=int, help="torch CPU threads")
    t.add_argument("--max-minutes", type=float, help="stop cleanly at a checkpoint after this long")
    t.add_argument("--recipe", metavar="JSON", help="Recipe fields over the shipped recipe (e.g. a larger model "
                                                    "or batch for a GPU); see --print-recipe")
    t.add_argument("--print-recipe", action="store_true", help="print the recipe as JSON (after --recipe/--steps) "
                                                                "and exit")
    t.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda when present; bf16 autocast there)")
    t.add_argument("--workers", type=int, help="processes building batches ahead (default: 0 on CPU, up to 8 "
                                               "beside a GPU); the batches do not depend on it")
    t.set_defaults(func=_cmd_train_tiny)

    c = sub.add_parser("tiny-card", help="measure the embedded model and rewrite its model card",
                       description="Score the embedded model on fresh offline RULER through KVPress's pipeline "
                                   "(no compression, StreamingLLM 0.88, SnapKV 0.25), re-check it uncompressed on a second "
                                   "held-out seed with more samples, decode the list tasks once more with repeated words banned (a "
                                   "diagnostic), and write README.md + quality.json.")
    c.add_argument("--model", default=str(PROFILES["cpu"].models[0]),
                   help="model folder (default: the shipped embedded model)")
    c.add_argument("--lengths", type=int, nargs="+", default=list(PROFILES["cpu"].lengths),
                   help="RULER lengths to measure (default: the cpu profile's)")
    c.add_argument("--samples", type=int, default=20, help="samples per task (default 20)")
    c.add_argument("--heldout-samples", type=int, default=12,
                   help="samples per task of the uncompressed held-out check on a second seed (0: skip; default 12)")
    c.set_defaults(func=_cmd_tiny_card)
