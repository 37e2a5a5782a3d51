"""The baselines as an arena submission would write them: numpy ``score(layer)`` functions (trusted code).

Why: a submission may import only numpy, so a copied baseline arrives as a numpy port of a torch press.
Token similarity to KVPress's torch source catches part of that (``similarity`` maps numpy and torch
operations to the same words), a port written against the arena's ``Layer`` is caught best by a reference
written against it too. Each function follows its KVPress press (named in its docstring) on the arena's
inputs (``method_api.Layer``: keys (H_kv, L, D), window queries (H_q, W, D), after RoPE); SnapKV, TOVA,
K-norm and StreamingLLM keep exactly what their presses keep (``tests/test_arena_judges_numpy_baselines.py``).
The rule judge reads their source (``inspect``); they are never run on submissions' behalf.
"""

from __future__ import annotations

import math

import numpy as np


def _window_attention(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Softmax attention of the window queries to every key, causal inside the window: (H_q, W, L)."""
    groups = queries.shape[0] // keys.shape[0]
    k = np.repeat(keys, groups, axis=0)
    w, n = queries.shape[1], k.shape[1]
    logits = queries @ k.transpose(0, 2, 1) / math.sqrt(queries.shape[-1])
    mask = np.triu(np.ones((w, n), dtype=bool), k=n - w + 1)
    logits = np.where(mask, -np.inf, logits)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def snapkv(layer, kernel_size: int = 5) -> np.ndarray:
    """SnapKVPress: window attention averaged over the window, avg-pooled, averaged per KV group; window kept."""
    attn = _window_attention(layer.queries, layer.keys)
    w, n = attn.shape[1], attn.shape[2]
    scores = attn[..., : n - w].mean(axis=1)
    pad = kernel_size // 2
    padded = np.pad(scores, ((0, 0), (pad, pad)))
    pooled = np.stack([padded[:, i: i + n - w] for i in range(kernel_size)]).mean(axis=0)
    pooled = pooled.reshape(layer.keys.shape[0], -1, n - w).mean(axis=1)
    window = np.full((layer.keys.shape[0], w), pooled.max() + 1)
    return np.concatenate([pooled, window], axis=1)


def tova(layer) -> np.ndarray:
    """TOVAPress: the last query's attention averaged over all heads, the same for every KV head; last kept."""
    attn = _window_attention(layer.queries[:, -1:], layer.keys)
    scores = attn[:, 0, :-1].mean(axis=0)
    scores = np.append(scores, scores.max() + 1)
    return np.tile(scores, (layer.keys.shape[0], 1))


def knorm(layer) -> np.ndarray:
    """KnormPress: keep the keys of smallest L2 norm."""
    return -np.linalg.norm(layer.keys, axis=-1)


def streaming_llm(layer, n_sink: int = 4) -> np.ndarray:
    """StreamingLLMPress: the first ``n_sink`` tokens and the most recent ones."""
    n = layer.keys.shape[1]
    scores = np.zeros((layer.keys.shape[0], n))
    scores[:, :n_sink] = 1.0
    scores[:, n - (layer.budget - n_sink):] = 1.0
    return scores


def random_scores(layer, seed: int = 0) -> np.ndarray:
    """RandomPress's idea: uniform random scores from a seeded generator (not its torch random stream)."""
    rng = np.random.default_rng(seed)
    return rng.random(layer.keys.shape[:2])


def h2o(layer, recent_fraction: float = 0.5) -> np.ndarray:
    """H2O (Zhang et al., 2023) at prefill: attention received, summed over the window's queries (what the arena
    shows a method; the suite's ``H2OPress`` sums over all prefill queries), mean per KV group; the newest
    ``recent_fraction`` of the budget kept."""
    attn = _window_attention(layer.queries, layer.keys)
    received = attn.sum(axis=1)
    received = received.reshape(layer.keys.shape[0], -1, received.shape[-1]).mean(axis=1)
    recent = int(layer.budget * recent_fraction)
    received[:, received.shape[-1] - recent:] = received.max() + 1
    return received


FORMS = {"snapkv": snapkv, "tova": tova, "knorm": knorm, "streaming_llm": streaming_llm, "random": random_scores,
         "h2o": h2o}
METHOD = {"snapkv": "SnapKV", "tova": "TOVA", "knorm": "K-norm", "streaming_llm": "StreamingLLM", "random": "random",
          "h2o": "H2O"}  # the published method each form is
