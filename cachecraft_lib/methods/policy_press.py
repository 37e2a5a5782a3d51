"""Any policy program as a KVPress press: ``PolicyPress(program, 0.88)`` runs the program's score and selection
on a feature context built from one tail-attention pass, validates them, and keeps the same indices for every KV
head of a layer (the form the search evolves; FRC's own presses are in ``scorers``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from kvpress import BasePress

from .features import build_context, tail_attention
from .policy import load_policy, run_policy

__all__ = ["PolicyPress"]


def _gather(keys: torch.Tensor, values: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the same token indices in every head and batch row."""
    idx = idx.to(keys.device)
    return keys[:, :, idx].contiguous(), values[:, :, idx].contiguous()


@dataclass
class PolicyPress(BasePress):
    """Any policy program (object, file path or source) as a KVPress press; its output is validated.

    Every layer builds a ``FeatureContext`` from one tail-attention pass, the policy scores and
    selects, ``validate_selection`` checks the invariants (a violation raises ``SelectionError``),
    and the same indices are kept for every head of the layer.
    """

    policy: Any = None
    compression_ratio: float = 0.0
    n_queries: int = 64
    window: int = 32
    chunk_length: int = 20
    record: bool = False
    kept: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.policy is None:
            raise ValueError("PolicyPress needs a policy: an object, a program file or program source")
        if isinstance(self.policy, str | Path):
            self.policy = load_policy(self.policy)

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if self.compression_ratio == 0:
            return keys, values
        attn = tail_attention(module, hidden_states, keys, kwargs["position_embeddings"], self.n_queries)
        ctx = build_context(attn, keys, values, self.compression_ratio, module.layer_idx, self.window,
                            self.chunk_length)
        idx = torch.from_numpy(run_policy(self.policy, ctx))
        if self.record:
            self.kept[module.layer_idx] = idx
        return _gather(keys, values, idx)
