"""H2O and R-KV as KVPress presses: scorers for prefill, for ``DecodingPress`` and for the capped harness.

Neither ships with KVPress 0.5.5. Both are ``ScorerPress`` subclasses, so they compose with KVPress's
wrappers (``DecodingPress``, ``AdaKVPress``, ``ChunkKVPress``) and with ``capped.CappedGenerator``.

- ``H2OPress`` (Zhang et al., 2023, "Heavy-Hitter Oracle"): a token's score is the attention it has
  received, summed over every query so far and averaged over the query heads of its KV head; the most
  recent ``recent_fraction`` of the kept budget is always kept. At prefill the sum runs over the prefill's
  queries; during decoding it must run over every step, which ``DecodingPress`` cannot give (its buffer is
  emptied at each compression), hence ``H2ODecodingPress`` and the harness's running sum.
- ``RKVPress`` (Cai et al., 2025, "R-KV: Redundancy-aware KV cache compression for reasoning models"):
  importance is the attention of the last ``window_size`` queries (mean over them, max-pooled along the
  sequence), redundancy is each key's mean cosine similarity to the other keys (softmax over the cache),
  where, for every token, its ``recent_copies`` most recent near-duplicates (cosine > ``similarity_threshold``)
  are not counted, so the older copies of a repeated token carry the redundancy; the score is
  ``mix_lambda * importance - (1 - mix_lambda) * redundancy``, and the query window is always kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from kvpress import DecodingPress, ScorerPress, SnapKVPress
from kvpress.presses.base_press import is_prefilling
from kvpress.utils import compute_n_kept

from .attention import group_mean, protect_last, query_attention

__all__ = ["H2ODecodingPress", "H2OPress", "RKVPress", "received_attention", "redundancy"]


def received_attention(module, hidden_states: torch.Tensor, keys: torch.Tensor, attentions: torch.Tensor | None,
                       kwargs: dict) -> torch.Tensor:
    """Attention each cached token received, summed over queries, per KV head: (B, H_kv, L).

    ``attentions`` may already be that sum (3-D, as a running sum is passed, like KVPress's ``CAMPress``),
    the eager attention weights (B, H_q, q, L), or None: then it is computed from the forward's queries.
    """
    n_kv = keys.shape[1]
    if attentions is not None and attentions.dim() == 3:
        if attentions.shape != keys.shape[:3]:
            raise ValueError(f"running attention sum {tuple(attentions.shape)} does not match the cache "
                             f"{tuple(keys.shape[:3])}: it must be pruned with the cache")
        return attentions
    if attentions is None:
        attentions = query_attention(module, hidden_states, keys, kwargs["position_embeddings"])
    return group_mean(attentions.float().sum(dim=2), n_kv)


@dataclass
class H2OPress(ScorerPress):
    """H2O: heavy hitters (attention received, summed over queries) plus a recent window."""

    compression_ratio: float = 0.0
    recent_fraction: float = 0.5  # share of the kept budget given to the most recent tokens (the paper: half)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.recent_fraction <= 1:
            raise ValueError(f"recent_fraction must be in [0, 1], got {self.recent_fraction}")

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        scores = received_attention(module, hidden_states, keys, attentions, kwargs)
        n_recent = int(compute_n_kept(keys.shape[2], self.compression_ratio) * self.recent_fraction)
        return protect_last(scores.to(keys.dtype), n_recent)


def redundancy(keys: torch.Tensor, threshold: float = 0.5, recent_copies: int = 1) -> torch.Tensor:
    """R-KV's redundancy of every cached key, (B, H, L), summing to 1 over L.

    Cosine similarity between keys (self-similarity zeroed); for each token, its ``recent_copies`` most
    recent keys with similarity above ``threshold`` are forgiven (set to 0); a key's redundancy is the mean
    of its column, softmaxed over the cache.
    """
    unit = keys.float() / keys.float().norm(dim=-1, keepdim=True).clamp_min(1e-8)
    sim = unit @ unit.transpose(-1, -2)
    sim.diagonal(dim1=-2, dim2=-1).zero_()
    k_len = keys.shape[2]
    if recent_copies > 0:
        position = torch.arange(k_len, device=keys.device).expand_as(sim)
        ranked = torch.where(sim > threshold, position, -1)
        newest = ranked.topk(min(recent_copies, k_len), dim=-1).values
        forgive = torch.zeros_like(sim, dtype=torch.bool)
        forgive.scatter_(-1, newest.clamp_min(0), newest >= 0)
        sim = sim.masked_fill(forgive, 0.0)
    return sim.mean(dim=-2).softmax(dim=-1)


@dataclass
class RKVPress(ScorerPress):
    """R-KV: attention of the last queries against key redundancy; the query window is kept."""

    compression_ratio: float = 0.0
    window_size: int = 8
    kernel_size: int = 7
    mix_lambda: float = 0.1
    similarity_threshold: float = 0.5
    recent_copies: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window_size < 1 or self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise ValueError("RKVPress needs window_size >= 1 and an odd kernel_size >= 1")
        if not 0 <= self.mix_lambda <= 1:
            raise ValueError(f"mix_lambda must be in [0, 1], got {self.mix_lambda}")

    def importance(self, module, hidden_states, keys, attentions, kwargs) -> torch.Tensor:
        """Mean attention of the last ``window_size`` queries on the older keys, max-pooled: (B, H_kv, L - w)."""
        w = self.window_size
        if attentions is not None and attentions.dim() == 4:
            attn = attentions[..., -w:, :-w]
        else:
            if hidden_states.shape[1] < w:
                raise ValueError(f"R-KV needs the last {w} queries; got {hidden_states.shape[1]} hidden states "
                                 f"(buffer more forwards, or use capped.CappedGenerator, which keeps them)")
            attn = SnapKVPress.compute_window_attention(module, hidden_states, keys, w,
                                                        kwargs["position_embeddings"])
        scores = attn.float().mean(dim=-2)
        scores = F.max_pool1d(scores, kernel_size=self.kernel_size, padding=self.kernel_size // 2, stride=1)
        return group_mean(scores, keys.shape[1])

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        w = self.window_size
        if keys.shape[2] <= w:
            raise ValueError(f"R-KV needs more than window_size={w} cached tokens, got {keys.shape[2]}")
        importance = self.importance(module, hidden_states, keys, attentions, kwargs)
        redundant = redundancy(keys, self.similarity_threshold, self.recent_copies)[..., :-w]
        scores = self.mix_lambda * importance - (1 - self.mix_lambda) * redundant
        scores = F.pad(scores, (0, w), value=scores.max().item() + 1)
        return scores.to(keys.dtype)


@dataclass
class H2ODecodingPress(DecodingPress):
    """KVPress's ``DecodingPress`` for H2O: every forward inside the press adds its queries' attention
    (each query rotated at its own position) to a per-layer running sum, which each compression scores
    and prunes with the cache. KVPress's pipeline prefills outside a decoding press, so there the sum
    starts at the first decoded token.
    """

    base_press: H2OPress = field(default_factory=H2OPress)
    received: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def forward_hook(self, module, input, kwargs, output):
        layer = module.layer_idx
        keys = kwargs["past_key_values"].layers[layer].keys
        step = received_attention(module, kwargs["hidden_states"], keys, None, kwargs)
        previous = self.received.get(layer)
        if previous is not None and not is_prefilling(kwargs["cache_position"], kwargs["hidden_states"].shape[1]):
            step[..., : previous.shape[-1]] += previous
        self.received[layer] = step
        return super().forward_hook(module, input, kwargs, output)

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        k_len, layer = keys.shape[2], module.layer_idx
        target = self._resolve_target_size(kwargs)
        if k_len <= target:
            return keys, values
        self.base_press.compression_ratio = self._find_target_compression_ratio(k_len, target)
        scores = self.base_press.score(module, hidden_states, keys, values, self.received[layer], kwargs)
        kept = scores.topk(target, dim=-1).indices.sort(dim=-1).values
        self.base_press.compression_ratio = 0.0
        self.received[layer] = self.received[layer].gather(-1, kept)
        index = kept.unsqueeze(-1).expand(-1, -1, -1, keys.shape[-1])
        return keys.gather(2, index).contiguous(), values.gather(2, index).contiguous()

    def reset(self) -> None:
        super().reset()
        self.received = {}
