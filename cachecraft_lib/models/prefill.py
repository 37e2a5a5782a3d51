"""One prefill of a context, from which the compressed cache of any single-pass press is derived.

Single-pass KVPress presses compress inside a hook that runs *after* each attention layer's full prefill
forward, so the prefill activations are the same for every press and ratio. ``SharedPrefill`` records each
layer's inputs to ``compress`` once; ``cache_for(press)`` then replays only the compression, layer by layer,
as the press's own hook would. The grid, the search cascade, the inspection notebooks and the latency
benchmarks all build on it.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpress import BasePress

from ..util.timers import clock


class _Capture(BasePress):
    """Records each layer's prefill inputs to ``compress`` and leaves the cache untouched."""

    def __init__(self) -> None:
        self.layers: list[tuple] = []

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        keep = {k: kwargs[k] for k in ("position_embeddings", "cache_position", "attention_mask", "position_ids")
                if k in kwargs}
        self.layers.append((module, hidden_states, keys, values, keep))
        return keys, values


class SharedPrefill:
    """One prefill of ``context_ids`` (1, L), kept per layer so that any press can compress it afterwards."""

    def __init__(self, model: Any, context_ids: torch.Tensor) -> None:
        from transformers import DynamicCache

        self.model = model
        self.context_length = context_ids.shape[1]
        capture = _Capture()
        start = clock(model.device)  # CUDA-synchronised: the prefill's own seconds, not its launch's
        with torch.no_grad(), capture(model):
            model.model(input_ids=context_ids.to(model.device), past_key_values=DynamicCache())
        self.seconds = clock(model.device) - start
        self.layers = capture.layers

    def cache_for(self, press: BasePress | None):
        """A fresh cache holding what ``press`` would have kept (as its hook would have, layer by layer).

        A head-wise press (AdaKV) leaves its fake-key masks on the attention modules, as in a real prefill:
        read them with ``head_masks`` before the next ``cache_for``.
        """
        from transformers import DynamicCache

        cache = DynamicCache()
        if press is not None:
            press.post_init_from_model(self.model)
        with torch.no_grad():
            for module, hidden, keys, values, kwargs in self.layers:
                self._ready(module, press)
                if press is not None:
                    keys, values = press.compress(module, hidden, keys, values, None, kwargs)
                cache.update(keys, values, module.layer_idx)
            finish = getattr(press, "finish_cache", None)  # a press that decides once every layer is seen
            if finish is not None:
                finish(cache)
        return cache

    def scores_for(self, press: BasePress) -> list[torch.Tensor]:
        """Each layer's token scores (1, H_kv, L) from a ``ScorerPress``: what its ``compress`` ranks by."""
        press.post_init_from_model(self.model)
        with torch.no_grad():
            return [press.score(self._ready(module, press), hidden, keys, values, None, kwargs)
                    for module, hidden, keys, values, kwargs in self.layers]

    def _ready(self, module: Any, press: BasePress | None) -> Any:
        """Put ``module`` back in the state a press's hook sees during a real prefill."""
        module.masked_key_indices = None
        if press is not None:
            module.rotary_emb = self.model.model.rotary_emb
        return module

    @staticmethod
    def clear_masks(model: Any) -> None:
        for layer in model.model.layers:
            layer.self_attn.masked_key_indices = None
