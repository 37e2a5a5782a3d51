"""Policy programs as KVPress presses, and the one registry of methods every notebook and command uses.

``PolicyPress(program, 0.88)`` runs any policy program's score and selection, validated, and keeps the same
indices for every KV head of a layer. FRC itself lives in ``scorers`` (``FRCScorerPress``, ``FRCPress``), as
KVPress-native presses; it is re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from kvpress import (
    AdaKVPress,
    BasePress,
    ChunkKVPress,
    ExpectedAttentionPress,
    FinchPress,
    KnormPress,
    PyramidKVPress,
    SnapKVPress,
    StreamingLLMPress,
    TOVAPress,
)

from .features import build_context, tail_attention
from .policy import load_policy, run_policy
from .programs import V1_PROGRAM
from .scorers import FRCPress, FRCScorerPress, PolicyScorerPress, WholeChunkPress

__all__ = ["FRCPress", "FRCScorerPress", "Method", "PolicyPress", "PolicyScorerPress", "REGISTRY", "WholeChunkPress",
           "make_press"]


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


# ----------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Method:
    """A named method: how to build its press for a ratio, and what it needs from the pipeline."""

    name: str
    build: Callable[[float], BasePress | None]
    description: str
    # head-wise masking, or cache lengths that vary by layer: whole-chunk selection keeps a shorter last
    # chunk in some layers only, which breaks the sdpa mask of a multi-token question forward on CPU
    needs_tokenwise_question: bool = False
    needs_query_aware: bool = False  # Finch reads the question from inside the context
    paper_baseline: bool = False


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("no_press", lambda r: None, "no compression (upper bound)", paper_baseline=True),
    Method("frc", lambda r: FRCPress(r, keep_last=False),
           "FRC (CacheCraft): 0.55 local + 0.30 density + 0.15 max-head, chunks of 20 (the paper's rule)",
           needs_tokenwise_question=True, paper_baseline=True),
    Method("snapkv", lambda r: SnapKVPress(r), "SnapKV: last-64-query attention, avg-pooled (kernel 5), per head",
           paper_baseline=True),
    Method("chunkkv", lambda r: ChunkKVPress(SnapKVPress(r), chunk_length=20),
           "ChunkKV over SnapKV scores, chunks of 20, shared across heads", needs_tokenwise_question=True,
           paper_baseline=True),
    Method("adasnapkv", lambda r: AdaKVPress(SnapKVPress(r)), "AdaKV over SnapKV: head-adaptive budgets",
           needs_tokenwise_question=True, paper_baseline=True),
    Method("finch", lambda r: FinchPress(r), "Finch: SnapKV with the question as window, keys re-rotated",
           needs_query_aware=True, paper_baseline=True),
    Method("expected_attention", lambda r: AdaKVPress(ExpectedAttentionPress(r, epsilon=1e-2)),
           "ExpectedAttention as KVPress's registry and leaderboard run it: AdaKV(ExpectedAttention, eps=1e-2)",
           needs_tokenwise_question=True, paper_baseline=True),
    Method("streaming_llm", lambda r: StreamingLLMPress(r), "StreamingLLM: 4 sinks + most recent tokens"),
    Method("knorm", lambda r: KnormPress(r), "Knorm: keep the keys of smallest norm"),
    Method("tova", lambda r: TOVAPress(r), "TOVA: attention of the last token, averaged over heads"),
    Method("pyramidkv", lambda r: PyramidKVPress(r), "PyramidKV: SnapKV with budgets shrinking over layers",
           needs_tokenwise_question=True),
    # scorer vs structure, and the within-FRC ablation (notebook 04)
    Method("v1_tokenwise", lambda r: PolicyPress(V1_PROGRAM, r),
           "V1-family generic scorer (5 signals, equal weights) with tokenwise top-k"),
    Method("frc_tokenwise", lambda r: FRCScorerPress(r), "FRC scorer with tokenwise top-k (KVPress's ScorerPress)"),
    Method("frc_no_maxhead", lambda r: FRCPress(r, weights=(0.55, 0.30, 0.0), keep_last=False),
           "FRC without the max-head term",
           needs_tokenwise_question=True),
    Method("frc_no_density", lambda r: FRCPress(r, weights=(0.55, 0.0, 0.15), keep_last=False),
           "FRC without the density term",
           needs_tokenwise_question=True),
    Method("frc_local_only", lambda r: FRCPress(r, weights=(1.0, 0.0, 0.0), keep_last=False),
           "FRC with the local term only",
           needs_tokenwise_question=True),
)}


def make_press(name: str, compression_ratio: float) -> BasePress | None:
    """The press registered under ``name`` at ``compression_ratio`` (``no_press`` gives None)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}; registered: {', '.join(REGISTRY)}")
    if not 0 <= compression_ratio < 1:
        raise ValueError(f"compression_ratio must be in [0, 1), got {compression_ratio}")
    return REGISTRY[name].build(compression_ratio)
