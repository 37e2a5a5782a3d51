"""Attention that decode-time presses score with: the queries of a forward, rotated at their own positions.

KVPress presses see only hidden states; the queries are recomputed from them (``get_prerope_query_states``)
and rotated with the forward's ``position_embeddings``. ``query_attention`` does this for every query of a
forward against the whole cache, causally: the forward's ``q`` tokens are the last ``q`` keys of the cache.
"""

from __future__ import annotations

import math

import torch
from kvpress.utils import get_prerope_query_states
from transformers.models.llama.modeling_llama import repeat_kv, rotate_half


def rotate(query: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """RoPE on ``query`` (B, H, q, d) with ``cos, sin`` of shape (B, q, d): each query at its own position."""
    cos, sin = position_embeddings
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return query * cos + rotate_half(query) * sin


def query_attention(module, hidden_states: torch.Tensor, keys: torch.Tensor,
                    position_embeddings: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Softmax attention (B, H_q, q, L) of the forward's ``q`` queries over the ``L`` cached keys.

    The queries are the last ``q`` tokens of the cache (their own keys are the last ``q`` keys), so query
    ``t`` sees keys ``0 .. L - q + t``. Computed in float32.
    """
    q_len, k_len = hidden_states.shape[1], keys.shape[2]
    if q_len > k_len:
        raise ValueError(f"{q_len} queries but only {k_len} cached keys: the queries' own keys must be cached")
    groups = module.config.num_attention_heads // keys.shape[1]
    query = rotate(get_prerope_query_states(module, hidden_states), position_embeddings)
    logits = query.float() @ repeat_kv(keys, groups).float().transpose(-1, -2) / math.sqrt(module.head_dim)
    future = torch.ones(q_len, k_len, dtype=torch.bool, device=keys.device).triu(k_len - q_len + 1)
    return logits.masked_fill(future, float("-inf")).softmax(dim=-1)


def group_mean(scores: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """Average (B, H_q, ...) over the query heads that share a KV head: (B, H_kv, ...)."""
    bsz, heads = scores.shape[:2]
    return scores.view(bsz, num_kv_heads, heads // num_kv_heads, *scores.shape[2:]).mean(dim=2)


def protect_last(scores: torch.Tensor, n: int) -> torch.Tensor:
    """``scores`` with its last ``n`` tokens raised above every other, so a top-k always keeps them."""
    if n <= 0:
        return scores
    scores = scores.clone()
    scores[..., -n:] = scores.max() + 1
    return scores
