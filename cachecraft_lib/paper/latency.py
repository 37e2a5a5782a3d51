"""Prefill latency: wall clock of the prefill including compression, and the press's own scoring cost.

For each context length and ratio: warm up, then ``repeats`` rounds; in each round every method, in an
order rotated round by round, times its scoring and selection alone (``press.compress`` over every
layer's captured prefill inputs) and then its whole prefill ``with press(model): model.model(ids)``
(CUDA-synchronised on GPU), recording peak memory (CUDA peak on GPU, process peak RSS on CPU). Tables
report the median with its interval over repeats, and a ratio of two methods from per-round pairs
(``stats.timing``): one number without its spread cannot tell noise from an effect. On a GPU without
the hub, ``eight_b_shaped_llama`` builds a model with Llama-3.1-8B's configuration and random weights:
latency needs no trained weights.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..methods.registry import make_press
from ..models.prefill import SharedPrefill
from ..stats.timing import Spread, median_interval, paired_ratios, verdict
from ..util.atomic import atomic_write_text
from ..util.progress import tqdm
from ..util.timers import sync as _sync

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


def _peak_reset(device: torch.device) -> int:
    """Start a peak-memory window; returns the bytes already allocated (the model, the shared prefill)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    return 0


def _peak_mb(device: torch.device, baseline: int) -> float:
    """MiB the window needed beyond ``baseline``: one method's prefill, not what was resident before it.
    NaN on a CPU, where no allocator counts one call's memory (the process's RSS peak is not per method)."""
    if device.type == "cuda":
        return (torch.cuda.max_memory_allocated(device) - baseline) / 2**20
    return float("nan")


def append_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Append ``table`` to the CSV at ``path`` keeping every column of both (the union; missing cells empty):
    an older file's header never drops a new column."""
    path = Path(path)
    if path.is_file() and path.stat().st_size:
        old = pd.read_csv(path)
        columns = list(old.columns) + [c for c in table.columns if c not in old.columns]
        table = pd.concat([old, table], ignore_index=True).reindex(columns=columns)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(path)
    return path


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


def _prefill_once(model: Any, ids: torch.Tensor, press: Any) -> float:
    """Seconds of one prefill with ``press`` (None: no compression), synchronised on a GPU."""
    from transformers import DynamicCache

    _sync(model.device)
    start = time.perf_counter()
    with torch.no_grad():
        if press is None:
            model.model(input_ids=ids, past_key_values=DynamicCache())
        else:
            with press(model):
                model.model(input_ids=ids, past_key_values=DynamicCache())
    _sync(model.device)
    return time.perf_counter() - start


def _scoring_once(model: Any, shared: SharedPrefill, press: Any) -> float:
    """Seconds of the press's own scoring and selection over all layers (0 for no press)."""
    if press is None:
        return 0.0
    _sync(model.device)
    start = time.perf_counter()
    shared.cache_for(press)
    _sync(model.device)
    return time.perf_counter() - start


def time_rounds(model: Any, ids: torch.Tensor, shared: SharedPrefill, presses: dict[str, Any], repeats: int,
                warmup: int = 2) -> pd.DataFrame:
    """Per round, every method once (the order rotated round by round): its scoring alone, then its whole
    prefill. One row per (round, method): ``prefill_ms``, ``scoring_ms``, ``peak_mb`` (the prefill's peak beyond
    the memory already allocated before it, so the model and the shared prefill are not counted; NaN on CPU). Methods of one round
    share the machine's state, so per-round ratios are paired (``stats.timing``)."""
    device = model.device
    names, rows = list(presses), []
    for i in range(warmup + repeats):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            scoring = _scoring_once(model, shared, presses[name])
            SharedPrefill.clear_masks(model)
            baseline = _peak_reset(device)
            prefill = _prefill_once(model, ids, presses[name])
            peak = _peak_mb(device, baseline)
            SharedPrefill.clear_masks(model)
            if i >= warmup:
                rows.append({"method": name, "repeat": i - warmup, "prefill_ms": prefill * 1000,
                             "scoring_ms": scoring * 1000, "peak_mb": peak})
    order = {name: k for k, name in enumerate(names)}
    return pd.DataFrame(rows).sort_values(["method", "repeat"], key=lambda c: c.map(order) if c.name == "method" else c,
                                          ignore_index=True)


def measure_samples(model: Any, model_name: str, lengths: Iterable[int], methods: Iterable[str], ratio: float,
                    repeats: int, warmup: int = 2, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Every timed repeat: one row per (length, round, method). Inputs are random token ids (content does not
    matter for timing)."""
    device = model.device
    gen = torch.Generator().manual_seed(seed)
    lengths, methods = list(lengths), list(methods)
    frames = []
    for length in tqdm(lengths, desc="latency", disable=not progress):
        ids = torch.randint(10, model.config.vocab_size - 10, (1, length), generator=gen).to(device)
        shared = SharedPrefill(model, ids)
        presses = {m: make_press(m, ratio if m != "no_press" else 0.0) for m in methods}
        rounds = time_rounds(model, ids, shared, presses, repeats, warmup)
        frames.append(rounds.assign(model=model_name, device=str(device), length=length, ratio=ratio,
                                    dtype=str(model.dtype).removeprefix("torch.")))
        del shared
    cols = ["model", "device", "dtype", "length", "method", "ratio", "repeat", "prefill_ms", "scoring_ms", "peak_mb"]
    return pd.concat(frames, ignore_index=True)[cols]


def summarise(samples: pd.DataFrame) -> pd.DataFrame:
    """The latency table: per (model, length, method) the mean and std (the paper's), the median with its
    interval over repeats (``stats.timing``), the scoring time likewise, and the peak memory."""
    rows = []
    keys = ["model", "device", "dtype", "length", "method", "ratio"]
    for key, g in samples.groupby(keys, sort=False):
        pre, sco = median_interval(g.prefill_ms.tolist()), median_interval(g.scoring_ms.tolist())
        ms = g.prefill_ms.tolist()
        rows.append({**dict(zip(keys, key, strict=True)), "repeats": len(g), "mean_ms": statistics.fmean(ms),
                     "std_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0, "median_ms": pre.median,
                     "median_lo_ms": pre.lo, "median_hi_ms": pre.hi, "coverage": pre.coverage,
                     "scoring_mean_ms": g.scoring_ms.mean(), "scoring_median_ms": sco.median,
                     "scoring_lo_ms": sco.lo, "scoring_hi_ms": sco.hi, "peak_mb": g.peak_mb.max()})
    return pd.DataFrame(rows)


def measure(model: Any, model_name: str, lengths: Iterable[int], methods: Iterable[str], ratio: float,
            repeats: int, warmup: int = 2, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """``summarise(measure_samples(...))``: the latency table alone (the CLI, scripts)."""
    return summarise(measure_samples(model, model_name, lengths, methods, ratio, repeats, warmup, seed, progress))


PAIRS = {"frc_over_snapkv": ("frc", "snapkv"), "frc_over_chunkkv": ("frc", "chunkkv")}


def ratios(samples: pd.DataFrame, column: str = "prefill_ms") -> pd.DataFrame:
    """FRC / SnapKV and FRC / ChunkKV per (model, length) for ``column`` (``prefill_ms`` or ``scoring_ms``):
    the median of per-round paired ratios and its interval (``stats.timing``). One row per ratio."""
    out = []
    for (model, length), g in samples.groupby(["model", "length"], sort=False):
        by = {m: t.sort_values("repeat")[column].tolist() for m, t in g.groupby("method")}
        for name, (a, b) in PAIRS.items():
            if a in by and b in by:
                s = median_interval(paired_ratios(by[a], by[b]))
                out.append({"model": model, "length": length, "ratio": name, "here": s.median, "lo": s.lo,
                            "hi": s.hi, "coverage": s.coverage, "repeats": s.n})
    return pd.DataFrame(out, columns=["model", "length", "ratio", "here", "lo", "hi", "coverage", "repeats"])


def save(table: pd.DataFrame, out_dir: str | Path, meta: dict | None = None,
         samples: pd.DataFrame | None = None) -> Path:
    """``latency.csv`` plus ``latency.json`` (the table and how it was measured), like a grid result, and
    ``latency_samples.csv`` (every repeat) when given, from which any paired ratio can be recomputed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "latency.csv", index=False)
    if samples is not None:
        samples.to_csv(out / "latency_samples.csv", index=False)
    payload = {"meta": {**(meta or {}), "torch": torch.__version__,
                        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                        "date": time.strftime("%Y-%m-%d")}, "rows": table.to_dict("records")}
    atomic_write_text(out / "latency.json", json.dumps(payload, indent=1))
    return out / "latency.csv"


PAPER_RATIOS = {"frc_over_snapkv": (1.1, 1.3), "frc_over_chunkkv": (1 / 1.6, 1 / 1.1)}


def paper_comparison(samples: pd.DataFrame) -> pd.DataFrame:
    """Prefill ratios FRC/SnapKV and FRC/ChunkKV here (median and paired interval), beside the paper's ranges
    (Llama-3.1-8B, H100), with a verdict: reproduced, contradicted or inconclusive (``stats.timing.verdict``)."""
    rows = []
    for r in ratios(samples, "prefill_ms").itertuples(index=False):
        lo, hi = PAPER_RATIOS[r.ratio]
        spread = Spread(r.here, r.lo, r.hi, r.coverage, r.repeats)
        rows.append({**r._asdict(), "paper_low": lo, "paper_high": hi, "verdict": verdict(spread, lo, hi)})
    return pd.DataFrame(rows)


def overhead_share(samples: pd.DataFrame) -> pd.DataFrame:
    """Each press's scoring + selection time as a share of its whole prefill: per round, the two timed back to
    back, then the median share and its interval; beside them the medians of each time."""
    out = []
    for (model, length, method), g in samples[samples.method != "no_press"].groupby(["model", "length", "method"],
                                                                                      sort=False):
        share = median_interval(paired_ratios(g.scoring_ms.tolist(), g.prefill_ms.tolist()))
        out.append({"model": model, "length": length, "method": method,
                    "scoring_median_ms": g.scoring_ms.median(), "median_ms": g.prefill_ms.median(),
                    "share_of_prefill": share.median, "share_lo": share.lo, "share_hi": share.hi,
                    "coverage": share.coverage})
    return pd.DataFrame(out)


def gpu_reference(path: str | Path | None = None) -> pd.DataFrame:
    """GPU measurements recorded in ``data/reference/latency_gpu.csv`` (date and GPU included)."""
    from ..paths import REPO

    return pd.read_csv(path or REPO / "data" / "reference" / "latency_gpu.csv")
