"""What the cascade keeps per stage sample: its feature contexts and token ids, never its prefill.

A sample's prefill (every layer's K/V, plus the hidden states a ``SharedPrefill`` records) is needed twice:
to build the feature contexts a candidate reads, and to answer with the tokens it keeps. Holding it in
between costs one prefill per stage sample for the whole search (about 1.5 GiB per Llama-8B sample at 4096
tokens, 455 samples on the paper profile), so it is not held: the contexts are built layer by layer inside
the prefill (a press hook; each layer's hidden states go as soon as its context is built), the cache is
dropped, and answering re-runs the prefill for one sample at a time (the same ids give the same K/V).
What stays per sample is its contexts (numpy, on the CPU) and its context and question ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from kvpress import BasePress

from ..methods.features import FeatureContext, build_context, tail_attention


class _ContextPress(BasePress):
    """Builds each layer's ``FeatureContext`` during the prefill and leaves the cache untouched."""

    def __init__(self, compression_ratio: float, n_queries: int, window: int) -> None:
        self.compression_ratio, self.n_queries, self.window = compression_ratio, n_queries, window
        self.contexts: list[FeatureContext] = []

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        attn = tail_attention(module, hidden_states, keys, kwargs["position_embeddings"], self.n_queries)
        self.contexts.append(build_context(attn, keys, values, self.compression_ratio, module.layer_idx,
                                           self.window))
        return keys, values


@dataclass
class StageSample:
    """One stage sample as the cascade keeps it: no tensor of the prefill's size."""

    row: Any
    contexts: list[FeatureContext]
    context_ids: torch.Tensor  # (1, L), CPU
    question_ids: torch.Tensor  # (1, Q), CPU

    @property
    def context_length(self) -> int:
        return int(self.context_ids.shape[1])


def prefill_cache(model: Any, context_ids: torch.Tensor):
    """The full cache of one context (a plain prefill, as ``SharedPrefill`` runs it)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.no_grad():
        model.model(input_ids=context_ids.to(model.device), past_key_values=cache)
    return cache


def build_sample(model: Any, pipe: Any, row: Any, compression_ratio: float, n_queries: int = 64,
                 window: int = 32) -> StageSample:
    """Tokenise ``row`` as the pipeline does, prefill it once to build its contexts, keep only those and the ids."""
    ids = pipe.preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**9)
    press = _ContextPress(compression_ratio, n_queries, window)
    with press(model):
        cache = prefill_cache(model, ids["context_ids"])
    del cache
    return StageSample(row, press.contexts, ids["context_ids"].cpu(), ids["questions_ids"][0].cpu())


def kept_digest(kept: list | None) -> str:
    """A digest of the token indices each layer keeps, in order (None: every token)."""
    digest = hashlib.sha256()
    for idx in kept if kept is not None else [None]:
        if idx is None:
            digest.update(b"all;")
        else:
            indices = np.asarray(idx, dtype=np.int64).ravel()
            digest.update(f"{indices.size}:".encode() + indices.tobytes() + b";")
    return digest.hexdigest()


def answer(model: Any, pipe: Any, sample: StageSample, kept: list | None) -> str:
    """Greedy answer from the cache that keeps ``kept[layer]`` token indices (None: every token)."""
    from transformers import DynamicCache

    full = prefill_cache(model, sample.context_ids)
    if kept is not None and len(kept) != len(full.layers):
        raise ValueError(f"{len(kept)} selections for {len(full.layers)} layers")
    cache = DynamicCache()
    for layer, idx in enumerate(kept or [None] * len(full.layers)):
        keys, values = full.layers[layer].keys, full.layers[layer].values
        if idx is not None:
            t = torch.as_tensor(idx, device=keys.device)
            keys, values = keys[:, :, t], values[:, :, t]
        cache.update(keys, values, layer)
    del full
    with torch.no_grad():
        return pipe.generate_answer(sample.question_ids, cache, sample.context_length, int(sample.row.max_new_tokens))
