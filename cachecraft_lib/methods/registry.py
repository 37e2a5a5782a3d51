"""The one registry of methods: every press the grid, the arena's boards and the decode-time harness run, by name.

Each ``Method`` says what a caller needs to know: how to build its prefill press for a compression ratio
(``build``; ``None`` for a decode-time-only method), its decode-time scorer for the capped harness (``decode``,
with the recent ``decode_window`` it reads and whether it needs H2O's running sum), and its needs: head-wise
masking (``masks_keys``: no physical memory saved), its own prefill (KVzip replays the context), a tokenwise
question forward, the question inside the context (query-aware), whether the paper compares it, and whether
the arena offers it to boards as a trusted baseline. The uncompressed cache is ``no_press`` everywhere (the
name KVPress's own evaluation uses).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvpress import (
    AdaKVPress,
    BasePress,
    ChunkKVPress,
    ExpectedAttentionPress,
    FinchPress,
    KnormPress,
    KVzipPress,
    PyramidKVPress,
    RandomPress,
    ScorerPress,
    SnapKVPress,
    StreamingLLMPress,
    TOVAPress,
)

from .decode_presses import H2OPress, RKVPress
from .policy_press import PolicyPress
from .programs import V1_PROGRAM
from .scorers import FRCPress, FRCScorerPress, PolicyScorerPress, WholeChunkPress

__all__ = ["FRCPress", "FRCScorerPress", "Method", "NO_PRESS", "PolicyPress", "PolicyScorerPress", "REGISTRY",
           "WholeChunkPress", "arena_baselines", "decode_press", "get_method", "make_press"]

NO_PRESS = "no_press"  # the uncompressed cache: the reference every score is compared or normalised to
RANDOM_SEED = 0  # random eviction is seeded, so a rerun gives the same table


@dataclass(frozen=True)
class Method:
    """A named method: its prefill press and/or decode-time scorer, and what it needs from the pipeline."""

    name: str
    build: Callable[[float], BasePress | None] | None  # the prefill press at a compression ratio (None: decode-time only)
    description: str
    decode: Callable[[], ScorerPress | None] | None = None  # a fresh decode-time scorer (None: prefill only)
    decode_window: int = 1  # recent tokens the decode-time scorer reads
    decode_accumulate: bool = False  # the decode-time scorer needs the attention received so far (H2O)
    # head-wise masking (AdaKV, and FRC's masked spare slots) or cache lengths that vary by layer (PyramidKV):
    # KVPress's fake keys for many question tokens at once fail on a small model, so the question goes token by token
    needs_tokenwise_question: bool = False
    needs_query_aware: bool = False  # Finch reads the question from inside the context
    masks_keys: bool = False  # evicts by masking keys in place: saves no physical memory
    own_prefill: bool = False  # replays the context after the prefill (KVzip): no shared prefill
    paper_baseline: bool = False  # one of the paper's compared methods (RULER grid)
    arena_baseline: bool = False  # offered to the arena's boards as a trusted baseline

    @property
    def prefill(self) -> bool:
        return self.build is not None

    @property
    def decode_time(self) -> bool:
        return self.decode is not None


def _m(name: str, description: str, build: Callable[[float], BasePress | None] | None, **needs) -> Method:
    """An entry written description first, so the table below reads as a list of methods."""
    return Method(name, build, description, **needs)


REGISTRY: dict[str, Method] = {m.name: m for m in (
    _m(NO_PRESS, "no compression: the full cache, the reference every score is compared to", lambda r: None,
       decode=lambda: None, paper_baseline=True, arena_baseline=True),
    _m("frc", "FRC (CacheCraft): 0.55 local + 0.30 density + 0.15 max-head, chunks of 20 (the paper's rule)",
       lambda r: FRCPress(r), needs_tokenwise_question=True, paper_baseline=True),
    _m("snapkv", "SnapKV: last-64-query attention, avg-pooled (kernel 5), per head; on query-agnostic boards the "
       "queries are the context's own", lambda r: SnapKVPress(r), paper_baseline=True, arena_baseline=True),
    _m("chunkkv", "ChunkKV over SnapKV scores, chunks of 20, shared across heads",
       lambda r: ChunkKVPress(SnapKVPress(r), chunk_length=20), needs_tokenwise_question=True, paper_baseline=True),
    _m("adasnapkv", "Ada-KV over SnapKV: head-adaptive budgets", lambda r: AdaKVPress(SnapKVPress(r)),
       needs_tokenwise_question=True, masks_keys=True, paper_baseline=True, arena_baseline=True),
    _m("finch", "Finch: SnapKV with the question as window, keys re-rotated", lambda r: FinchPress(r),
       needs_query_aware=True, paper_baseline=True),
    _m("expected_attention", "Expected Attention as KVPress's registry and leaderboard run it: "
       "AdaKV(ExpectedAttention, eps=1e-2)", lambda r: AdaKVPress(ExpectedAttentionPress(r, epsilon=1e-2)),
       needs_tokenwise_question=True, masks_keys=True, paper_baseline=True, arena_baseline=True),
    _m("streaming_llm", "StreamingLLM: 4 sink tokens and the most recent tokens", lambda r: StreamingLLMPress(r),
       decode=StreamingLLMPress, arena_baseline=True),
    _m("knorm", "K-norm: keep the keys of smallest norm", lambda r: KnormPress(r), arena_baseline=True),
    _m("tova", "TOVA: attention of the last token, averaged over heads", lambda r: TOVAPress(r), decode=TOVAPress,
       arena_baseline=True),
    _m("pyramidkv", "PyramidKV: SnapKV with budgets shrinking over layers", lambda r: PyramidKVPress(r),
       needs_tokenwise_question=True, arena_baseline=True),
    _m("random", "random eviction (seeded)", lambda r: RandomPress(r, seed=RANDOM_SEED),
       decode=lambda: RandomPress(seed=RANDOM_SEED), arena_baseline=True),
    _m("kvzip", "KVzip: context reconstruction after the prefill (slow, one-off: B_offline)",
       lambda r: KVzipPress(r), masks_keys=True, own_prefill=True, arena_baseline=True),
    _m("h2o", "H2O: attention received since the first token, plus the newest half of the budget", None,
       decode=H2OPress, decode_accumulate=True, arena_baseline=True),
    _m("rkv", "R-KV: last-8-query attention (max-pooled) against key redundancy, lambda 0.1", None,
       decode=RKVPress, decode_window=8, arena_baseline=True),
    # scorer vs structure, and the within-FRC ablation (notebook 04)
    _m("v1_tokenwise", "V1-family generic scorer (5 signals, equal weights) with tokenwise top-k",
       lambda r: PolicyPress(V1_PROGRAM, r)),
    _m("frc_tokenwise", "FRC scorer with tokenwise top-k (KVPress's ScorerPress)", lambda r: FRCScorerPress(r)),
    _m("frc_no_maxhead", "FRC without the max-head term",
       lambda r: FRCPress(r, weights=(0.55, 0.30, 0.0)), needs_tokenwise_question=True),
    _m("frc_no_density", "FRC without the density term",
       lambda r: FRCPress(r, weights=(0.55, 0.0, 0.15)), needs_tokenwise_question=True),
    _m("frc_local_only", "FRC with the local term only",
       lambda r: FRCPress(r, weights=(1.0, 0.0, 0.0)), needs_tokenwise_question=True),
)}


def get_method(name: str) -> Method:
    """The registered method, or a ValueError that lists the registered names."""
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}; registered: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def make_press(name: str, compression_ratio: float) -> BasePress | None:
    """The prefill press registered under ``name`` at ``compression_ratio`` (``no_press`` gives None)."""
    method = get_method(name)
    if method.build is None:
        raise ValueError(f"{name} is a decode-time method only (board C); it has no prefill press")
    if not 0 <= compression_ratio < 1:
        raise ValueError(f"compression_ratio must be in [0, 1), got {compression_ratio}")
    return method.build(compression_ratio)


def decode_press(name: str) -> ScorerPress | None:
    """A fresh decode-time scorer for ``name`` (presses carry state; ``no_press`` gives None)."""
    method = get_method(name)
    if method.decode is None:
        raise ValueError(f"{name} has no decode-time form; decode-time methods: "
                         f"{', '.join(n for n, m in REGISTRY.items() if m.decode_time)}")
    return method.decode()


def arena_baselines(decode_time: bool = False) -> dict[str, Method]:
    """The trusted baselines a board may name: prefill ones (boards A, B) or decode-time ones (board C)."""
    return {n: m for n, m in REGISTRY.items()
            if m.arena_baseline and (m.decode_time if decode_time else m.prefill)}
