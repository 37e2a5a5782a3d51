"""The Python steps of ``scripts/gpu_check.sh``; each also runs on a CPU at tiny sizes (``--device cpu``).

    python scripts/gpu_check.py env --out DIR
    python scripts/gpu_check.py prefill --out DIR [--model 8b-shaped|tiny] [--length 8192] [--device cuda]
    python scripts/gpu_check.py search --out DIR [--iterations 2] [--device cuda]

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("env", "prefill", "search"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", default="8b-shaped", help="8b-shaped (random weights, no hub) or a model name")
    parser.add_argument("--layers", type=int, help="fewer layers of the 8B-shaped model")
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "env":
        _write(out, "env", env_record())
    elif args.step == "prefill":
        _write(out, "prefill", prefill_record(_model(args.model, args.device, args.layers), args.length))
    else:
        _write(out, "search", search_record(out, args.iterations, args.device))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
