"""A KV-cache layer with room for the whole answer, for the batched decoder (``grid.decode``).

Why: transformers' dynamic cache grows by concatenation, copying the batch's whole cache at every generated
token; this layer is allocated once (context + question + answer) and written in place.
"""

from __future__ import annotations

from typing import Any

import torch


class PreallocatedLayer:
    """A cache layer with room for the whole answer: writes in place instead of growing by concatenation
    (which copies the batch's cache at every token) and returns a view of the filled slots."""

    is_sliding = False
    is_compileable = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int) -> None:
        self.keys, self.values, self.length = keys, values, filled
        self.is_initialized = True
        self.dtype, self.device = keys.dtype, keys.device

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, cache_kwargs: Any = None):
        q = key_states.shape[2]
        self.keys[:, :, self.length:self.length + q] = key_states
        self.values[:, :, self.length:self.length + q] = value_states
        self.length += q
        return self.keys[:, :, :self.length], self.values[:, :, :self.length]

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, cache_position: torch.Tensor) -> tuple[int, int]:
        return self.length + cache_position.shape[0], 0

    def get_max_cache_shape(self) -> int:
        return self.keys.shape[2]
