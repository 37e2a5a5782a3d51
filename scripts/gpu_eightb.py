"""Step ``eightb`` (b): a model of Llama-3.1-8B's shapes with random weights (no hub): the shared prefill's
memory and every press's per-layer cache lengths at 8192 tokens, the prefill latency of FRC, SnapKV and
ChunkKV (>= 10 interleaved repeats, median and interval, FRC's paired ratios against the paper's), and one
sample's 31 grid cells decoded in one batch against KVPress's pipeline per cell (its own prefill under the
press, then its decode), with the batch size, the decode's peak memory and the speed-up (goal on a GPU: 15x)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

GPU = dict(length=8192, repeats=12, question=32, max_new=16, layers=None, pipeline_budget_s=75.0)
CPU = dict(length=512, repeats=10, question=8, max_new=4, layers=2, pipeline_budget_s=60.0)
RATIO = 0.88
LATENCY_METHODS = ("no_press", "snapkv", "chunkkv", "frc")
MIN_REPEATS = 10  # fewer give no verdict worth reading


def build_model(scale: str):
    """The 8B-shaped model on CUDA; on a CPU the same architecture at a small width (code path only)."""
    from cachecraft_lib.paper.latency import LLAMA_31_8B, eight_b_shaped_llama

    if scale == "gpu":
        model = eight_b_shaped_llama("cuda")
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        small = dict(LLAMA_31_8B, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=64)
        with torch.device("cpu"):
            model = LlamaForCausalLM._from_config(LlamaConfig(**small, attn_implementation="sdpa"),
                                                  dtype=torch.float32).eval()  # CPU bf16 matmuls crawl
    model.generation_config.eos_token_id = None  # random weights: every row decodes its whole budget
    return model


def word_tokenizer(vocab: int):
    """A tokenizer of ``vocab`` placeholder words: the pipeline decodes ids with it (the weights are random)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", pad_token="t1", eos_token="t2")


def _allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


def prefill_memory_and_lengths(model: Any, ids: torch.Tensor) -> tuple[dict, pd.DataFrame]:
    """The shared prefill's memory, and each single-pass press's kept length per layer from it."""
    from cachecraft_lib.methods.registry import REGISTRY, make_press
    from cachecraft_lib.models.prefill import SharedPrefill

    before = _allocated(model.device)
    shared = SharedPrefill(model, ids)
    captured = sum(t.nbytes for _, h, k, v, _ in shared.layers for t in (h, k, v))
    memory = {"length": ids.shape[1], "prefill_s": round(shared.seconds, 3), "captured_gib": captured / 2**30,
              "allocated_gib": (_allocated(model.device) - before) / 2**30 if model.device.type == "cuda" else None}
    rows = []
    for name, spec in REGISTRY.items():
        if name == "no_press" or spec.needs_query_aware or not spec.prefill or spec.own_prefill:  # Finch prefills on its own (the decode below has it)
            continue
        try:
            cache = shared.cache_for(make_press(name, RATIO))
            masks = [getattr(layer.self_attn, "masked_key_indices", None) for layer in model.model.layers]
            for layer in range(len(cache.layers)):
                rows.append({"method": name, "layer": layer, "length": cache.get_seq_length(layer),
                             "head_masked": masks[layer] is not None})
        except Exception as err:  # one press's failure is a row, not the end of the step
            rows.append({"method": name, "layer": -1, "length": -1, "error": f"{type(err).__name__}: {err}"[:200]})
        finally:
            SharedPrefill.clear_masks(model)
    del shared
    return memory, pd.DataFrame(rows)


def latency(model: Any, length: int, repeats: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    from cachecraft_lib.paper.latency import measure_samples, paper_comparison, summarise

    if repeats < MIN_REPEATS:
        raise ValueError(f"{repeats} repeats give no verdict: use at least {MIN_REPEATS}")
    samples = measure_samples(model, "llama-3.1-8b-shaped (random weights)", [length], LATENCY_METHODS, RATIO,
                              repeats, progress=False)
    return summarise(samples), paper_comparison(samples), samples


def grid_cells() -> list[tuple[str, float]]:
    """The paper grid's cells of one (model, length): no compression plus every method at every ratio (31)."""
    from cachecraft_lib.profiles import PAPER_METHODS, PAPER_RATIOS

    return [("no_press", 0.0)] + [(m, r) for m in PAPER_METHODS for r in PAPER_RATIOS]


def main_run(work: Path, scale: str) -> dict:
    from gpu_decode import decode_comparison

    size = GPU if scale == "gpu" else CPU
    model = build_model(scale)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(10, model.config.vocab_size - 10, (1, size["length"]), generator=gen).to(model.device)
    memory, lengths = prefill_memory_and_lengths(model, ids)
    lengths.to_csv(work / "cache_lengths.csv", index=False)
    table, ratios, samples = latency(model, size["length"], size["repeats"])
    table.to_csv(work / "latency.csv", index=False)
    ratios.to_csv(work / "latency_ratios.csv", index=False)
    samples.to_csv(work / "latency_samples.csv", index=False)
    question = torch.randint(10, model.config.vocab_size - 10, (1, size["question"]), generator=gen).to(model.device)
    decode = decode_comparison(model, word_tokenizer(model.config.vocab_size), ids, question, grid_cells(),
                               size["max_new"], size["pipeline_budget_s"])
    per_method = lengths[lengths.layer >= 0].groupby("method", sort=False).length.agg(["min", "max"])
    return {"memory": memory, "cache_lengths": {m: f"{r['min']}..{r['max']}" for m, r in per_method.iterrows()},
            "press_errors": lengths[lengths.layer < 0].to_dict("records"), "latency": table.to_dict("records"),
            "latency_ratios": ratios.to_dict("records"), "decode": decode, "size": size}


def run(work: Path, scale: str) -> dict:
    start = time.time()
    record = main_run(work, scale)
    decode, mem = record["decode"], record["memory"]
    ratio = {r["ratio"]: f"{r['here']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}] {r['verdict']}"
             for r in record["latency_ratios"]}
    median = {r["method"]: round(r["median_ms"], 1) for r in record["latency"]}
    record["headline"] = (f"prefill {mem['length']} tok: captured {mem['captured_gib']:.2f} GiB; median ms {median}; "
                          f"FRC/SnapKV {ratio.get('frc_over_snapkv')}; FRC/ChunkKV {ratio.get('frc_over_chunkkv')}; "
                          f"31 cells batched {decode['batched_s']:.1f}s (batch {decode['batch_size']}, peak "
                          f"{decode['decode_peak_gib']} GiB) vs pipeline {decode['pipeline_s']:.1f}s"
                          f"{' (extrapolated)' if decode['extrapolated'] else ''} = {decode['speedup']:.1f}x")
    problems = [f"{e['method']} raised" for e in record["press_errors"]]
    if scale != "gpu":
        verdict = "cpu scale (no CUDA): small Llama-shaped model on the CPU; no GPU figures"
    elif problems:
        verdict = "fail: " + "; ".join(problems)
    else:
        verdict = "pass" if decode["speedup"] >= 15 else f"pass (speed-up {decode['speedup']:.1f}x, under the 15x goal)"
    record["verdict"] = verdict
    record["step_s"] = round(time.time() - start, 1)
    return record
