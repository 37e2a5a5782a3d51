"""The helpers a search policy program imports, numpy only, and the read-only feature view it receives.

Inside the sandbox this module *is* ``cachecraft_lib.policy`` for the program (the search's child layer
registers it under that name), so the seeds and every program keep ``from cachecraft_lib.policy import
maxabs, topk_tokens, topk_chunks``. They give the torch side's answers (``cachecraft_lib.methods.frc``; a test
checks both); on exact ties the earlier token or chunk is kept (torch's choice among ties is unspecified).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def maxabs(x: Any) -> np.ndarray:
    """``x / max|x|`` for numpy arrays (all-zero stays zero): the paper's MaxAbs normalisation."""
    arr = np.asarray(x, dtype=np.float32)
    peak = np.abs(arr).max() if arr.size else 0.0
    return arr / peak if peak > 0 else arr


def n_kept_tokens(length: int, compression_ratio: float) -> int:
    """K = max(1, floor(L * (1 - r))), as KVPress counts it."""
    return max(1, int(length * (1 - compression_ratio)))


def n_kept_chunks(length: int, compression_ratio: float, chunk_length: int = 20) -> tuple[int, int]:
    """(n_chunks, n_keep) with n_chunks = ceil(L / Lc) and n_keep = max(1, floor(n_chunks * (1 - r)))."""
    n_chunks = math.ceil(length / chunk_length)
    return n_chunks, max(1, int(n_chunks * (1 - compression_ratio)))


def _top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, sorted by index (the earlier one wins a tie)."""
    return np.sort(np.argsort(-values, kind="stable")[:k])


def topk_tokens(scores: Any, ctx: Any) -> np.ndarray:
    """Tokenwise selection: the sorted indices of the ``K`` highest scores."""
    s = np.array(scores, dtype=np.float32).reshape(-1)
    return _top(s, n_kept_tokens(s.shape[0], ctx.compression_ratio)).astype(np.int64)


def chunk_means(scores: np.ndarray, chunk_length: int) -> np.ndarray:
    """Mean token score per chunk; the last, shorter chunk is averaged over its own tokens."""
    length = scores.shape[0]
    n_chunks = math.ceil(length / chunk_length)
    rest = length - (n_chunks - 1) * chunk_length
    padded = np.zeros(n_chunks * chunk_length, dtype=np.float32)
    padded[:length] = scores
    means = padded.reshape(n_chunks, chunk_length).sum(-1) / np.float32(chunk_length)
    if rest != chunk_length:
        means[-1] = means[-1] * np.float32(chunk_length / rest)
    return means


def topk_chunks(scores: Any, ctx: Any, chunk_length: int | None = None) -> np.ndarray:
    """Chunked selection: whole chunks of ``ctx.chunk_length`` tokens with the best mean score, sorted."""
    s = np.array(scores, dtype=np.float32).reshape(-1)
    lc = int(chunk_length or ctx.chunk_length)
    _, n_keep = n_kept_chunks(s.shape[0], ctx.compression_ratio, lc)
    top = _top(chunk_means(s, lc), n_keep)
    idx = (top[:, None] * lc + np.arange(lc)[None]).reshape(-1)
    return idx[idx < s.shape[0]].astype(np.int64)


class FeatureView:
    """What a program sees for one layer: the feature arrays (read-only) and the scalars, as attributes."""

    __slots__ = ("features", "L", "K", "H", "Q", "layer", "compression_ratio", "chunk_length", "window", "extra")

    def __init__(self, features: dict[str, np.ndarray], **scalars: Any) -> None:
        self.features, self.extra = features, {}
        for name in self.__slots__[1:-1]:
            setattr(self, name, scalars[name])

    def __getattr__(self, name: str) -> np.ndarray:
        if name in self.features:
            return self.features[name]
        raise AttributeError(f"FeatureContext has no feature {name!r}; features: {', '.join(self.features)}")

    def __getitem__(self, name: str) -> np.ndarray:
        return self.features[name]

    def scalars(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ("L", "K", "H", "Q", "layer")}
