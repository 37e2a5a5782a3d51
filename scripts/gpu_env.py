"""Step ``env``: the versions that matter, where each package was imported from, and every import the check
needs. The shell script stops the check here when an import fails: every later step would fail at it."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import platform
from pathlib import Path

PACKAGES = ("torch", "transformers", "tokenizers", "kvpress", "openevolve", "openai", "pydantic", "datasets",
            "pandas", "numpy", "huggingface_hub", "accelerate", "peft", "safetensors", "wonderwords", "fire")
# what the steps import; kvpress and transformers check their own pins when imported
IMPORTS = ("transformers", "tokenizers", "kvpress", "openevolve", "openevolve.controller", "openai", "datasets",
           "wonderwords", "cachecraft_lib", "cachecraft_lib.grid", "cachecraft_lib.paper.latency",
           "cachecraft_lib.search.evolve", "cachecraft_lib.search.cascade", "cachecraft_lib.tiny.train",
           "cachecraft_lib.models.pipeline", "cachecraft_lib.ruler")
# carried at the project's pins: these must come from the carried wheels, not from the machine's image
PINNED = {"transformers": "5.2.0", "tokenizers": "0.22.2", "kvpress": "0.5.5", "openevolve": "0.4.1"}


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _origin(name: str) -> str:
    """``carried`` when imported from the wheels' folder (first on PYTHONPATH), else ``machine``."""
    site = os.environ.get("GPU_CHECK_SITE")
    spec = importlib.util.find_spec(name)
    where = str(Path(spec.origin).resolve()) if spec and spec.origin else ""
    return "carried" if site and where.startswith(str(Path(site).resolve())) else "machine"


def device_record() -> dict:
    import torch

    cuda = torch.cuda.is_available()
    conv = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    record = {"cuda": cuda, "cuda_version": torch.version.cuda, "cudnn_conv_fp32_precision": conv,
              "matmul_fp32_precision": torch.get_float32_matmul_precision()}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        record.update(name=props.name, capability=f"{props.major}.{props.minor}",
                      memory_gib=round(props.total_memory / 2**30, 1), bf16=torch.cuda.is_bf16_supported())
    return record


def run(work: Path, scale: str) -> dict:
    versions = {name: _version(name) for name in PACKAGES}
    failed = {}
    for name in IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as err:  # every import is tried, so one run names them all
            failed[name] = f"{type(err).__name__}: {str(err)[:200]}"
    wrong = {n: versions[n] for n, v in PINNED.items() if versions[n] != v}
    origins = {name: _origin(name) for name in PINNED if name not in failed}
    not_carried = sorted(n for n, o in origins.items() if o != "carried") if os.environ.get("GPU_CHECK_SITE") else []
    problems = [f"import {n}: {e}" for n, e in failed.items()] + [f"{n} is {v}, not {PINNED[n]}" for n, v in
                                                                    wrong.items()]
    problems += [f"{n} comes from the machine, not the carried wheels" for n in not_carried]
    record = {"python": platform.python_version(), "versions": versions, "origins": origins,
              "import_failures": failed, "device": device_record(), "scale": scale}
    short = " ".join(f"{n}={versions[n]}" for n in ("torch", "transformers", "tokenizers", "kvpress", "openevolve"))
    record["headline"] = f"python {record['python']} {short} cuda={record['device']['cuda']}"
    record["verdict"] = "fail: " + "; ".join(problems) if problems else "pass"
    for name in PACKAGES:
        print(f"  {name:16s} {versions[name] or '-':14s} {origins.get(name, '')}")
    return record
