"""Rehearse the ``paper`` profile on models of the paper's shapes with random weights, and measure its cost.

    python scripts/rehearse_paper.py [--out FILE] [--shape-scale S] [--lengths N ..] [--tasks T ..]
                                     [--latency-repeats R] [--device cuda|cpu]

What it runs, with the notebooks' own library calls: notebook 03's grid (``grid_cells`` of the paper profile at
one sample per task, offline RULER, ``runner.run_group`` with a loaded model: every method x ratio plus
no_press, decoded across samples) and notebook 06's prefill latency (``latency.measure_samples``), for
Llama-3.1-8B's and Qwen3-8B's configs built offline (``models.shapes``), with SmolLM2's tokenizer where
``cachecraft fetch-instruct`` has made it (or ``--tokenizer``), else the embedded model's. It writes measured
seconds per sample and per cell to ``--out`` (default ``docs/gpu_runs/paper_cost.json`` on CUDA), which
``cachecraft grid --estimate`` reads (``grid.measured``); the file is rewritten after every group, so a run cut
short by its timeout keeps what it measured. On a CPU, ``--shape-scale 0.02 --lengths 1024 --tasks niah_single_1
--max-new-tokens 4`` checks
the code path in seconds (tests/test_gpu_rehearsal.py); its record says so and is never taken for the cost.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from cachecraft_lib.grid import CellStore, grid_cells  # noqa: E402
from cachecraft_lib.grid.measured import MEASURED  # noqa: E402
from cachecraft_lib.grid.runner import group_cells, run_group  # noqa: E402
from cachecraft_lib.grid.store import RESULT  # noqa: E402
from cachecraft_lib.models.names import INSTRUCT_DIR, TINY_DIR  # noqa: E402
from cachecraft_lib.models.shapes import PAPER_SHAPES, random_model  # noqa: E402
from cachecraft_lib.profiles import get_profile  # noqa: E402
from cachecraft_lib.util.timers import clock  # noqa: E402

LATENCY_METHODS = ("no_press", "snapkv", "chunkkv", "frc")


def tokenizer_folder(given: str | None) -> Path:
    """``--tokenizer``, else SmolLM2's (a real 49k BPE tokenizer) where fetched, else the embedded model's."""
    for folder in (given, INSTRUCT_DIR, TINY_DIR):
        if folder and (Path(folder) / "tokenizer.json").is_file():
            return Path(folder)
    raise SystemExit("no tokenizer.json found: pass --tokenizer FOLDER")


def measure_group(members, model, tokenizer, out: Path) -> dict:
    """One (model, length) group of the grid through ``run_group``: seconds per sample and per cell."""
    store = CellStore(out)
    start = clock(model.device)
    failed = run_group(members, store, model, tokenizer, decode="batched")
    seconds = clock(model.device) - start
    cells, samples = {}, 0
    for cell in members:
        path = store.folder(cell) / RESULT
        if path.is_file():
            result = json.loads(path.read_text())
            samples = max(samples, len(result["predictions"]))
            cells[f"{cell.method}@{cell.ratio:g}"] = round(result["timings"]["total_s"] / len(result["predictions"]), 4)
    if not samples:
        raise RuntimeError(f"no cell of {members[0].model} at {members[0].length} finished: {failed}")
    return {"model": members[0].model, "length": members[0].length, "cells": len(members), "samples": samples,
            "seconds": round(seconds, 2), "s_per_sample": round(seconds / samples, 3),
            "s_per_cell": round(seconds / samples / len(members), 4), "cell_seconds_per_sample": cells,
            "failed": failed}


def measure_latency(model, name: str, lengths: tuple[int, ...], repeats: int) -> list[dict]:
    from cachecraft_lib.paper import latency

    table = latency.summarise(latency.measure_samples(model, name, lengths, LATENCY_METHODS, 0.88, repeats,
                                                      progress=False))
    return [{"model": name, "length": int(r.length), "method": r.method, "median_ms": round(r.median_ms, 2),
             "median_lo_ms": round(r.median_lo_ms, 2), "median_hi_ms": round(r.median_hi_ms, 2),
             "repeats": int(r.repeats)} for r in table.itertuples()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="the JSON record (default: docs/gpu_runs/paper_cost.json on CUDA, "
                                      "data/results/rehearsal/paper_cost.json otherwise)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape-scale", type=float, default=1.0, help="depth and widths times this (CPU: 0.02)")
    parser.add_argument("--lengths", type=int, nargs="+", help="context lengths (default: the paper profile's)")
    parser.add_argument("--tasks", nargs="+", help="RULER tasks (default: all 13)")
    parser.add_argument("--samples", type=int, default=1, help="samples per task (default 1)")
    parser.add_argument("--max-new-tokens", type=int, help="cap every answer (default: each task's own; CPU: 4)")
    parser.add_argument("--latency-repeats", type=int, default=10, help="notebook 06's repeats (0: no latency)")
    parser.add_argument("--models", nargs="+", default=list(PAPER_SHAPES), choices=list(PAPER_SHAPES))
    parser.add_argument("--tokenizer", help="a folder with tokenizer.json (default: SmolLM2's, else the embedded)")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    cuda = args.device.startswith("cuda")
    out = Path(args.out) if args.out else (MEASURED if cuda and args.shape_scale == 1 else
                                           REPO / "data" / "results" / "rehearsal" / "paper_cost.json")
    overrides = {"samples_per_task": args.samples, "ruler_source": "offline", "models": tuple(args.models)}
    overrides.update({k: tuple(v) for k, v in (("lengths", args.lengths), ("tasks", args.tasks)) if v})
    if args.max_new_tokens:
        overrides["max_new_tokens"] = args.max_new_tokens
    profile = get_profile("paper", embedded=False, **overrides)
    folder = tokenizer_folder(args.tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    dtype = torch.bfloat16 if cuda else torch.float32  # CPU bf16 matmuls crawl
    record = {"measured_on": dt.date.today().isoformat(), "device": args.device, "shape_scale": args.shape_scale,
              "device_name": torch.cuda.get_device_name(args.device) if cuda else "cpu",
              "dtype": str(dtype).removeprefix("torch."), "tokenizer": folder.name, "samples_per_task": args.samples,
              "tasks": list(profile.tasks or ()) or "all 13", "max_new_tokens": args.max_new_tokens or "each task's",
              "decode": "batched, across samples (grid.batches)",
              "groups": [], "latency": []}
    out.parent.mkdir(parents=True, exist_ok=True)
    for name, members_by_group in _by_model(grid_cells(profile)).items():
        built = time.time()
        model = random_model(name, args.shape_scale, args.device, dtype)
        print(f"{name}: random weights, {model.config.num_hidden_layers} layers (built in {time.time() - built:.0f}s)",
              flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            for members in members_by_group:
                group = measure_group(members, model, tokenizer, Path(scratch))
                record["groups"].append(group)
                out.write_text(json.dumps(record, indent=1))
                print(f"  grid {group['length']}: {group['samples']} samples x {group['cells']} cells in "
                      f"{group['seconds']}s ({group['s_per_sample']} s/sample)", flush=True)
        if args.latency_repeats:
            record["latency"] += measure_latency(model, name, profile.lengths, args.latency_repeats)
            out.write_text(json.dumps(record, indent=1))
        del model
        if cuda:
            torch.cuda.empty_cache()
    print(f"wrote {out}")
    return 0


def _by_model(cells) -> dict[str, list]:
    """The grid's (model, length) groups, per model in the profile's order."""
    out: dict[str, list] = {}
    for members in group_cells(cells).values():
        out.setdefault(members[0].model, []).append(members)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
