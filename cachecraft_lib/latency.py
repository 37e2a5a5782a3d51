"""Prefill latency: wall clock of the prefill including compression, and the press's own scoring cost.

For each method, context length and ratio: warm up, then time ``with press(model): model.model(ids)``
``repeats`` times (CUDA-synchronised on GPU); separately time only the press's scoring and selection
(``press.compress`` over every layer's captured prefill inputs); record peak memory (CUDA peak on
GPU, process peak RSS on CPU). On a GPU without the hub, ``eight_b_shaped_llama`` builds a model with
Llama-3.1-8B's configuration and random weights: latency needs no trained weights.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from .atomic import atomic_write_text
from .prefill import SharedPrefill
from .presses import make_press

# Llama-3.1-8B's architecture (config.json of meta-llama/Llama-3.1-8B-Instruct)
LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
                   rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})


def eight_b_shaped_llama(device: str = "cuda", dtype: torch.dtype = torch.bfloat16, layers: int | None = None):
    """A ``LlamaForCausalLM`` with Llama-3.1-8B's shapes and random weights (``layers`` to shrink it for tests)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(LLAMA_31_8B, num_hidden_layers=layers or LLAMA_31_8B["num_hidden_layers"])
    config = LlamaConfig(**cfg, attn_implementation="sdpa")
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=dtype)
    return model.eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**20 if sys.platform == "darwin" else 2**10)


def time_prefill(model: Any, ids: torch.Tensor, press: Any, repeats: int, warmup: int = 2) -> list[float]:
    """Seconds per prefill (compression included), after ``warmup`` untimed runs."""
    from transformers import DynamicCache

    device = model.device
    times = []
    for i in range(warmup + repeats):
        _sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            if press is None:
                model.model(input_ids=ids, past_key_values=DynamicCache())
            else:
                with press(model):
                    model.model(input_ids=ids, past_key_values=DynamicCache())
        _sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def compare_scoring(model: Any, shared: SharedPrefill, presses: dict[str, Any], repeats: int,
                    warmup: int = 2) -> dict[str, list[float]]:
    """Seconds of each press's own scoring and selection over all layers (no prefill), on captured inputs;
    presses interleaved run by run so drift and noise hit all alike."""
    device = model.device
    times: dict[str, list[float]] = {name: [] for name in presses}
    for i in range(warmup + repeats):
        for name, press in presses.items():
            if press is None:
                times[name].append(0.0)
                continue
            _sync(device)
            start = time.perf_counter()
            shared.cache_for(press)
            _sync(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    SharedPrefill.clear_masks(model)
    return {name: t[-repeats:] for name, t in times.items()}


@dataclass
class LatencyRow:
    model: str
    device: str
    dtype: str
    length: int
    method: str
    ratio: float
    repeats: int
    mean_ms: float
    std_ms: float
    median_ms: float
    scoring_mean_ms: float
    scoring_median_ms: float
    peak_mb: float


def _stats(seconds: list[float]) -> tuple[float, float, float]:
    ms = [s * 1000 for s in seconds]
    return statistics.fmean(ms), statistics.pstdev(ms) if len(ms) > 1 else 0.0, statistics.median(ms)


def measure(model: Any, model_name: str, lengths: Iterable[int], methods: Iterable[str], ratio: float,
            repeats: int, warmup: int = 2, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """The latency table: one row per (length, method). Inputs are random token ids (content does not matter)."""
    rows = []
    device = model.device
    gen = torch.Generator().manual_seed(seed)
    lengths, methods = list(lengths), list(methods)
    with tqdm(total=len(lengths) * len(methods), desc="latency", disable=not progress) as bar:
        for length in lengths:
            ids = torch.randint(10, model.config.vocab_size - 10, (1, length), generator=gen).to(device)
            shared = SharedPrefill(model, ids)
            presses = {m: make_press(m, ratio if m != "no_press" else 0.0) for m in methods}
            scoring_all = compare_scoring(model, shared, presses, repeats, warmup)
            for method in methods:
                press = presses[method]
                _peak_reset(device)
                prefill = time_prefill(model, ids, press, repeats, warmup)
                peak = _peak_mb(device)
                SharedPrefill.clear_masks(model)
                mean, std, median = _stats(prefill)
                s_mean, _, s_median = _stats(scoring_all[method])
                rows.append(LatencyRow(model_name, str(device), str(model.dtype).removeprefix("torch."), length,
                                       method, ratio, repeats, mean, std, median, s_mean, s_median, peak))
                bar.update(1)
            del shared
    return pd.DataFrame([asdict(r) for r in rows])


def ratios(table: pd.DataFrame, column: str = "mean_ms") -> pd.DataFrame:
    """FRC / SnapKV and FRC / ChunkKV per (model, length) for ``column`` (prefill or scoring time)."""
    out = []
    for (model, length), g in table.groupby(["model", "length"]):
        t = g.set_index("method")[column]
        row = {"model": model, "length": length}
        for other in ("snapkv", "chunkkv"):
            if "frc" in t and other in t and t[other] > 0:
                row[f"frc_over_{other}"] = t["frc"] / t[other]
        out.append(row)
    return pd.DataFrame(out)


def save(table: pd.DataFrame, out_dir: str | Path, meta: dict | None = None) -> Path:
    """``latency.csv`` plus ``latency.json`` (the table and how it was measured), like a grid result."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "latency.csv", index=False)
    payload = {"meta": {**(meta or {}), "torch": torch.__version__,
                        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                        "date": time.strftime("%Y-%m-%d")}, "rows": table.to_dict("records")}
    atomic_write_text(out / "latency.json", json.dumps(payload, indent=1))
    return out / "latency.csv"


PAPER_RATIOS = {"frc_over_snapkv": (1.1, 1.3), "frc_over_chunkkv": (1 / 1.6, 1 / 1.1)}


def paper_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Prefill ratios FRC/SnapKV and FRC/ChunkKV here, beside the paper's ranges (Llama-3.1-8B, H100)."""
    ours = ratios(table, "mean_ms")
    rows = []
    for _, r in ours.iterrows():
        for key, (lo, hi) in PAPER_RATIOS.items():
            if key in r and pd.notna(r[key]):
                rows.append({"model": r["model"], "length": r["length"], "ratio": key, "here": r[key],
                             "paper_low": lo, "paper_high": hi})
    return pd.DataFrame(rows)


def overhead_share(table: pd.DataFrame) -> pd.DataFrame:
    """Each press's scoring + selection time as a share of its whole prefill (median)."""
    out = table[table.method != "no_press"][["model", "length", "method", "scoring_median_ms", "median_ms"]].copy()
    out["share_of_prefill"] = out.scoring_median_ms / out.median_ms
    return out


def gpu_reference(path: str | Path | None = None) -> pd.DataFrame:
    """GPU measurements recorded in ``data/reference/latency_gpu.csv`` (date and GPU included)."""
    from .paths import REPO

    return pd.read_csv(path or REPO / "data" / "reference" / "latency_gpu.csv")
