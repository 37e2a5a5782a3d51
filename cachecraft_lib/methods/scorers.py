"""FRC and policy programs as KVPress scorer presses, and the whole-chunk wrapper FRC composes its scorer with.

``FRCScorerPress`` is FRC's Eq. (1) as a KVPress ``ScorerPress``: any KVPress wrapper that takes a scorer
takes it (``AdaKVPress``, ``ChunkKVPress``, ``KeyRerotationPress``, ``DecodingPress``, ...). Its scores are
the same for every KV head of a batch row, and it works on whatever hidden states a press receives (a
decoding press's buffer of recent tokens included). ``WholeChunkPress`` keeps whole chunks of any scorer's
tokens, chosen per batch row (KVPress's ``ChunkKVPress`` uses row 0 for every row), falls back to tokenwise
selection below one chunk, and gives every layer the same number of slots, masking the spare ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from kvpress import BasePress, ScorerPress

from . import frc
from .features import buffer_position_embeddings, build_context, tail_attention
from .policy import load_policy


@dataclass
class FRCScorerPress(ScorerPress):
    """s(t) = w0 * local^ + w1 * density^ + w2 * maxhead^ from the tail attention, per batch row."""

    compression_ratio: float = 0.0
    weights: tuple[float, float, float] = frc.FRC_WEIGHTS
    window: int = 32
    n_queries: int = 64

    def __post_init__(self) -> None:
        if not 0 <= self.compression_ratio < 1:
            raise ValueError(f"compression_ratio must be in [0, 1), got {self.compression_ratio}")
        if len(self.weights) != 3:
            raise ValueError(f"FRC takes three weights (local, density, maxhead), got {self.weights}")

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        embeddings = buffer_position_embeddings(module, hidden_states, kwargs)
        rows = [frc.frc_token_scores(tail_attention(module, hidden_states, keys, embeddings, self.n_queries, row=b),
                                     self.window, self.weights) for b in range(keys.shape[0])]
        return torch.stack(rows)[:, None, :].expand(-1, keys.shape[1], -1).contiguous()


def pad_to_slots(chosen: list[torch.Tensor], slots: int, length: int) -> tuple[torch.Tensor, list[int]]:
    """Each row's kept indices followed by enough evicted ones to fill ``slots``, as one (B, slots) tensor, and
    each row's count of real (kept) slots. The filler slots sit after the kept ones and are masked, never read."""
    rows, real = [], []
    for kept in chosen:
        missing = slots - len(kept)
        if missing:
            evicted = torch.ones(length, dtype=torch.bool, device=kept.device)
            evicted[kept] = False
            kept = torch.cat([kept, evicted.nonzero()[:missing, 0]])
        rows.append(kept)
        real.append(slots - missing)
    return torch.stack(rows), real


def filler_mask(real: list[int], slots: int, heads: int) -> tuple[torch.Tensor, ...] | None:
    """KVPress's ``masked_key_indices`` (batch, head, slot) for every head's filler slots, or None without any."""
    cells = [(b, h, s) for b, n in enumerate(real) for h in range(heads) for s in range(n, slots)]
    if not cells:
        return None
    return tuple(torch.tensor(column) for column in zip(*cells, strict=True))


@dataclass
class WholeChunkPress(BasePress):
    """Whole chunks of ``chunk_length`` tokens with the best mean score of ``press``, per batch row.

    Below one chunk the scorer's own tokenwise top-k applies. The paper's rule keeps the short last chunk
    only where it ranks, so layers would keep different counts, which KVPress's stock pipeline cannot take
    under sdpa (one attention mask for all layers). Instead every layer gets ``frc.chunk_slots`` slots: where
    the short chunk is kept, the missing slots hold evicted tokens masked the way KVPress masks head-wise
    budgets (``module.masked_key_indices``, as ``AdaKVPress`` does), so the tokens attended to are exactly the
    paper's. ``record=True`` keeps batch row 0's kept indices per layer in ``kept`` (for notebooks).
    """

    press: ScorerPress = None
    chunk_length: int = 20
    keep_last: bool = False
    record: bool = False
    kept: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.press, ScorerPress):
            raise TypeError(f"WholeChunkPress needs a KVPress ScorerPress, got {type(self.press).__name__}")

    @property
    def compression_ratio(self) -> float:
        return self.press.compression_ratio

    @compression_ratio.setter
    def compression_ratio(self, value: float) -> None:
        self.press.compression_ratio = value

    def post_init_from_model(self, model: Any) -> None:
        self.press.post_init_from_model(model)

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if self.compression_ratio == 0:
            return keys, values
        length = keys.shape[2]
        if length < self.chunk_length:
            return self.press.compress(module, hidden_states, keys, values, attentions, kwargs)
        scores = self.press.score(module, hidden_states, keys, values, attentions, kwargs).float()
        per_row = scores[:, 0] if bool((scores == scores[:, :1]).all()) else scores.mean(dim=1)
        chosen = [frc.chunk_top_k(s, self.compression_ratio, self.chunk_length, self.keep_last) for s in per_row]
        if self.record:
            self.kept[module.layer_idx] = chosen[0].cpu()
        slots = frc.chunk_slots(length, self.compression_ratio, self.chunk_length, self.keep_last)
        idx, real = pad_to_slots(chosen, slots, length)
        masked = filler_mask(real, slots, keys.shape[1])
        if masked is not None:
            module.masked_key_indices = tuple(t.to(keys.device) for t in masked)
        idx = idx.to(keys.device)
        gather = idx[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
        return keys.gather(2, gather).contiguous(), values.gather(2, gather).contiguous()


class FRCPress(WholeChunkPress):
    """FRC (CacheCraft) as the paper defines it: ``FRCScorerPress`` in whole chunks of 20 tokens, one index set
    per layer and batch row, the short last chunk kept only where it ranks.

    Works in KVPress's stock pipeline under sdpa, ``pipe(context, question=q, press=FRCPress(0.88))``: layers
    that keep the short chunk fill their spare slots with masked ones (``WholeChunkPress``). As with KVPress's
    head-wise presses, eager attention ignores the masks; the grid's own decoder applies them exactly.
    """

    def __init__(self, compression_ratio: float = 0.0, weights: tuple[float, float, float] = frc.FRC_WEIGHTS,
                 window: int = 32, chunk_length: int = 20, n_queries: int = 64, keep_last: bool = False,
                 record: bool = False) -> None:
        super().__init__(press=FRCScorerPress(compression_ratio, tuple(weights), window, n_queries),
                         chunk_length=chunk_length, keep_last=keep_last, record=record)

    @property
    def weights(self) -> tuple[float, float, float]:
        return self.press.weights


@dataclass
class PolicyScorerPress(ScorerPress):
    """A policy program's ``score_tokens`` as a KVPress scorer press (its selection function is not used), so
    a program whose selection is the top-k of its scores composes with KVPress's wrappers. Trusted programs
    only: it runs in-process (the search runs candidates isolated). Build it with keywords:
    ``PolicyScorerPress(policy=path, compression_ratio=0.5)`` (KVPress's ratio is the first field)."""

    policy: Any = None
    compression_ratio: float = 0.0
    n_queries: int = 64
    window: int = 32
    chunk_length: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.policy is None:
            raise ValueError("PolicyScorerPress needs a policy: an object, a program file or program source")
        if not hasattr(self.policy, "score_tokens"):
            self.policy = load_policy(self.policy)

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        embeddings = buffer_position_embeddings(module, hidden_states, kwargs)
        rows = []
        for b in range(keys.shape[0]):
            attn = tail_attention(module, hidden_states, keys, embeddings, self.n_queries, row=b)
            ctx = build_context(attn, keys[b:b + 1], values[b:b + 1], self.compression_ratio, module.layer_idx,
                                self.window, self.chunk_length)
            scores = np.asarray(self.policy.score_tokens(ctx), dtype=np.float32)
            if scores.shape != (keys.shape[2],) or not np.isfinite(scores).all():
                raise ValueError(f"score_tokens must return {keys.shape[2]} finite scores, got shape {scores.shape}")
            rows.append(torch.from_numpy(scores.copy()))
        return torch.stack(rows).to(keys.device)[:, None, :].expand(-1, keys.shape[1], -1).contiguous()
