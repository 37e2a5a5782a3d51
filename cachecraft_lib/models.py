"""Load a model and tokenizer by name: the embedded tiny model or any Hugging Face id, alike.

``load_model("tiny")`` (or the folder ``data/models/tiny-ruler-llama``) gives the embedded default;
``load_model("meta-llama/Llama-3.1-8B-Instruct")`` the paper's model where the hub is reachable.
Attention is sdpa everywhere: every KVPress press used here runs under it on CPU and GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .paths import MODELS

ALIASES = {"tiny": MODELS / "tiny-ruler-llama", "tiny-ruler-llama": MODELS / "tiny-ruler-llama"}


class ModelUnavailable(RuntimeError):
    """The model cannot be loaded here; the message says why and what to do."""


def resolve(name_or_path: str | Path) -> str:
    """An alias, a local folder, or a Hugging Face id (returned unchanged)."""
    if str(name_or_path) in ALIASES:
        return str(ALIASES[str(name_or_path)])
    return str(name_or_path)


def is_embedded(name_or_path: str | Path) -> bool:
    """True for the embedded stand-in model, whose results must be labelled as such."""
    try:
        return Path(resolve(name_or_path)).resolve().parent == MODELS.resolve()
    except OSError:
        return False


def pick_device(device: str | None = None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """``auto``: bfloat16 on CUDA, float32 on CPU (CPU bf16 matmuls are slow and lossy)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def load_model(name_or_path: str | Path, device: str | None = None, dtype: str | torch.dtype | None = "auto",
               ) -> tuple[Any, Any]:
    """``(model, tokenizer)`` in eval mode on ``device`` with sdpa attention.

    Raises ``ModelUnavailable`` with a remedy when a local folder lacks weights or a hub id cannot
    be fetched (no network, gated model without login, wrong id).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = resolve(name_or_path)
    local = Path(target)
    if local.exists() and not any(local.glob("*.safetensors")) and not any(local.glob("*.bin")):
        raise ModelUnavailable(
            f"{local} has no weights yet. Train the embedded model with `cachecraft train-tiny` "
            f"(or `make train-tiny`), or pass a Hugging Face id on a machine with hub access.")
    device = pick_device(device)
    if is_embedded(target):  # a 38-tensor model: the loading bar is noise
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    from huggingface_hub import constants

    from .ruler.dataset import hub_reachable

    offline_before = constants.HF_HUB_OFFLINE
    if not local.exists() and not hub_reachable():
        constants.HF_HUB_OFFLINE = True  # use the local HF cache only, and fail fast instead of retrying
    try:
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=pick_dtype(dtype, device),
                                                     attn_implementation="sdpa")
    except OSError as err:
        raise ModelUnavailable(
            f"cannot load {target!r}: it is not a local folder and the Hugging Face hub could not provide it "
            f"({type(err).__name__}: {str(err).splitlines()[0][:200]}). On a machine with network access, "
            f"log in with `huggingface-cli login` (Llama-3.1 is gated) or check the id; offline, use the "
            f"embedded model: load_model('tiny') or the smoke/cpu profiles.") from err
    finally:
        constants.HF_HUB_OFFLINE = offline_before
    model.to(device).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
