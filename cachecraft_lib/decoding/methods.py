"""The decode-time baselines, each a ``CapMethod`` the capped harness runs: TOVA, H2O, R-KV, StreamingLLM,
random and the full cache. TOVA, StreamingLLM and random are KVPress's own scorers; H2O and R-KV are ours."""

from __future__ import annotations

from collections.abc import Callable

from kvpress import RandomPress, StreamingLLMPress, TOVAPress

from .capped import CapMethod
from .presses import H2OPress, RKVPress

__all__ = ["CAP_BASELINES", "cap_method"]

CAP_BASELINES: dict[str, tuple[Callable[[], CapMethod], str]] = {
    "full": (lambda: CapMethod("full", None), "no eviction (the reference)"),
    "tova": (lambda: CapMethod("tova", TOVAPress(), window=1),
             "TOVA: the newest token's attention, averaged over heads (KVPress's TOVAPress)"),
    "h2o": (lambda: CapMethod("h2o", H2OPress(), window=1, accumulate=True),
            "H2O: attention received since the first token, plus the newest half of the budget"),
    "rkv": (lambda: CapMethod("rkv", RKVPress(), window=8),
            "R-KV: last-8-query attention (max-pooled) against key redundancy, lambda 0.1"),
    "streaming_llm": (lambda: CapMethod("streaming_llm", StreamingLLMPress(), window=1),
                      "StreamingLLM: 4 sink tokens and the newest tokens (KVPress's StreamingLLMPress)"),
    "random": (lambda: CapMethod("random", RandomPress(seed=0), window=1),
               "random eviction, seeded (KVPress's RandomPress)"),
}


def cap_method(name: str) -> CapMethod:
    """A fresh ``CapMethod`` for a baseline name (a fresh press: presses carry state)."""
    if name not in CAP_BASELINES:
        raise ValueError(f"unknown decode-time method {name!r}; known: {', '.join(CAP_BASELINES)}")
    return CAP_BASELINES[name][0]()
