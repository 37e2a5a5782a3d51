"""The paper's two models as shapes only: configs of Llama-3.1-8B and Qwen3-8B built offline with random weights.

Why: the paper grid's cost on a GPU is measured by running its code on models of the paper's shapes (the hub and
its gated weights are out of reach where the suite is checked), and on a CPU the same code runs on a down-scaled
shape (``scale``) so that the path is tested cheaply. Weights are random, so answers are meaningless and no eos
is set: every row decodes its whole ``max_new_tokens`` (an upper bound on the decode's cost).
"""

from __future__ import annotations

from typing import Any

import torch

LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
                   rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
QWEN3_8B = dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False)
PAPER_SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "meta-llama/Llama-3.1-8B-Instruct": ("llama", LLAMA_31_8B),
    "Qwen/Qwen3-8B": ("qwen3", QWEN3_8B),
}


def scaled(config: dict[str, Any], scale: float) -> dict[str, Any]:
    """``config`` with its depth and widths times ``scale`` (1 = unchanged): at least 2 layers, 2 query heads of
    32 dimensions and the same query heads per KV head; the vocabulary is kept (the tokenizer's ids must fit)."""
    if not 0 < scale <= 1:
        raise ValueError(f"shape scale must be in (0, 1], got {scale}")
    if scale == 1:
        return dict(config)
    group = config["num_attention_heads"] // config["num_key_value_heads"]
    kv = max(1, round(config["num_key_value_heads"] * scale))
    head_dim = max(32, round(config["head_dim"] * scale ** 0.5 / 16) * 16)
    heads = max(2, kv * group)
    hidden = heads * head_dim
    return dict(config, num_hidden_layers=max(2, round(config["num_hidden_layers"] * scale)), hidden_size=hidden,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                intermediate_size=round(hidden * config["intermediate_size"] / config["hidden_size"]))


def random_model(name: str, scale: float = 1.0, device: str = "cuda", dtype: torch.dtype = torch.bfloat16) -> Any:
    """A causal LM of ``name``'s shape (a key of ``PAPER_SHAPES``) with random weights, sdpa attention, no eos."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if name not in PAPER_SHAPES:
        raise ValueError(f"no shape for {name!r}; known: {', '.join(PAPER_SHAPES)}")
    family, config = PAPER_SHAPES[name]
    config_cls, model_cls = (LlamaConfig, LlamaForCausalLM) if family == "llama" else (Qwen3Config, Qwen3ForCausalLM)
    torch.manual_seed(0)
    with torch.device(device):
        model = model_cls._from_config(config_cls(**scaled(config, scale), attn_implementation="sdpa"), dtype=dtype)
    model.generation_config.eos_token_id = None
    model.config.eos_token_id = None
    return model.eval()
