"""The arena's trusted baselines: published methods as KVPress 0.5.5 presses, by the names boards use.

Most come from the suite's registry (``presses.REGISTRY``); the arena adds random eviction (seeded) and KVzip,
which replays the context after the prefill and so cannot be served by the shared prefill (``own_prefill``).
``masks_keys`` marks presses that evict by masking keys in place (AdaKV, the registry's AdaKV
ExpectedAttention, KVzip): they save no physical memory, and the arena reports their physical bytes as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvpress import BasePress, KVzipPress, RandomPress

from ..methods.registry import make_press

RANDOM_SEED = 0


@dataclass(frozen=True)
class Baseline:
    name: str
    build: Callable[[float], BasePress | None]
    description: str
    masks_keys: bool = False
    own_prefill: bool = False


def _registry(name: str) -> Callable[[float], BasePress | None]:
    return lambda ratio: make_press(name, ratio)


BASELINES: dict[str, Baseline] = {b.name: b for b in (
    Baseline("full", lambda ratio: None, "the full cache (no eviction): the reference every score is normalised to"),
    Baseline("random", lambda ratio: RandomPress(ratio, seed=RANDOM_SEED), "random eviction (seeded)"),
    Baseline("snapkv", _registry("snapkv"), "SnapKV: last-64-query attention, avg-pooled; on B boards the queries "
             "are the context's own (query-agnostic SnapKV)"),
    Baseline("pyramidkv", _registry("pyramidkv"), "PyramidKV: SnapKV with budgets shrinking over layers"),
    Baseline("adasnapkv", _registry("adasnapkv"), "Ada-KV over SnapKV: head-adaptive budgets", masks_keys=True),
    Baseline("tova", _registry("tova"), "TOVA: attention of the last token, averaged over heads"),
    Baseline("streaming_llm", _registry("streaming_llm"), "StreamingLLM: 4 sinks + the most recent tokens"),
    Baseline("knorm", _registry("knorm"), "K-norm: keep the keys of smallest norm"),
    Baseline("expected_attention", _registry("expected_attention"),
             "Expected Attention as KVPress's registry runs it: AdaKV(ExpectedAttention, eps=1e-2)", masks_keys=True),
    Baseline("kvzip", lambda ratio: KVzipPress(ratio), "KVzip: context reconstruction after the prefill (slow, "
             "one-off: B_offline)", masks_keys=True, own_prefill=True),
)}


def baseline(name: str) -> Baseline:
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    return BASELINES[name]
