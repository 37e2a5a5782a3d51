"""FRC as pure functions, one per equation of the CacheCraft paper (Eq. (1), the density window, chunk rule).

Input: ``attn``, the group-averaged tail attention A~[g, q, t] of shape (H_kv, Q, L): the last Q
prompt positions (RoPE re-applied) attending to all L keys, averaged over each GQA group.

    local(t)   = mean_{g, last W queries} A~[g, q, t]
    abar(t)    = mean_{g, all Q queries}  A~[g, q, t]
    density(t) = (1/Wd) * sum_{|tau - t| <= Wd//2} abar(tau)      (zero padding at the edges)
                 Wd = max(3, min(33, 2*floor(L/64) + 1))
    maxhead(t) = max_g mean_q A~[g, q, t]
    s(t)       = 0.55 * local^(t) + 0.30 * density^(t) + 0.15 * maxhead^(t),   f^ = f / max_t |f(t)|
    chunks of Lc = 20 tokens, chunk score = mean of s over its tokens,
    n_keep = max(1, floor(n_chunks * (1 - r))), kept = union of the top n_keep chunks, sorted.

All work after the tail attention is O(L * H_kv) plus a top-k: the cost the paper claims.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch

FRC_WEIGHTS = (0.55, 0.30, 0.15)
FRC_SEED_WEIGHTS = (0.60, 0.25, 0.15)  # the V5 seed the search started from


def maxabs(x: torch.Tensor) -> torch.Tensor:
    """``x / max|x|``; an all-zero signal stays zero instead of becoming NaN (no host sync on GPU)."""
    return x / x.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)


def density_window(length: int) -> int:
    """Wd = max(3, min(33, 2*floor(L/64) + 1)): odd, from 3 tokens up to 33 at L >= 1024."""
    return max(3, min(33, 2 * (length // 64) + 1))


@contextmanager
def exact_fp32(device: torch.device) -> Iterator[None]:
    """Float32 convolutions in full precision on ``device``: cuDNN runs them in TF32 by default (about 1e-3
    relative error, enough to flip near-tied chunks), so on CUDA its precision is set to IEEE for the block and
    restored after it. A no-op on a CPU, which has no TF32."""
    if torch.device(device).type != "cuda":
        yield
        return
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):  # torch >= 2.9
        before, conv.fp32_precision = conv.fp32_precision, "ieee"
        try:
            yield
        finally:
            conv.fp32_precision = before
    else:
        before, torch.backends.cudnn.allow_tf32 = torch.backends.cudnn.allow_tf32, False
        try:
            yield
        finally:
            torch.backends.cudnn.allow_tf32 = before


def density(abar: torch.Tensor, wd: int | None = None) -> torch.Tensor:
    """Mean of ``abar`` over the centred window of ``wd`` tokens, zero-padded, divided by ``wd`` (exact in
    float32 on a GPU too: ``exact_fp32``)."""
    wd = wd or density_window(abar.shape[-1])
    kernel = torch.ones(1, 1, wd, dtype=abar.dtype, device=abar.device)
    with exact_fp32(abar.device):
        return torch.nn.functional.conv1d(abar.view(1, 1, -1), kernel, padding=wd // 2).view(-1) / wd


def frc_signals(attn: torch.Tensor, window: int = 32) -> dict[str, torch.Tensor]:
    """The three raw FRC signals (and ``abar``) from group-averaged tail attention (H_kv, Q, L)."""
    if attn.dim() != 3:
        raise ValueError(f"attn must be (H_kv, Q, L), got shape {tuple(attn.shape)}")
    per_head = attn.mean(dim=1)  # (H_kv, L): mean over all Q queries
    abar = per_head.mean(dim=0)
    return {"local": attn[:, -window:, :].mean(dim=(0, 1)), "abar": abar, "density": density(abar),
            "maxhead": per_head.amax(dim=0)}


def frc_token_scores(attn: torch.Tensor, window: int = 32,
                     weights: tuple[float, float, float] = FRC_WEIGHTS) -> torch.Tensor:
    """s(t) = w0 * local^ + w1 * density^ + w2 * maxhead^, shape (L,)."""
    sig = frc_signals(attn, window)
    normed = maxabs(torch.stack((sig["local"], sig["density"], sig["maxhead"])))  # one reduction for the three
    return weights[0] * normed[0] + weights[1] * normed[1] + weights[2] * normed[2]


def n_kept_tokens(length: int, compression_ratio: float) -> int:
    """K = max(1, floor(L * (1 - r))), as KVPress counts it."""
    return max(1, int(length * (1 - compression_ratio)))


def n_kept_chunks(length: int, compression_ratio: float, chunk_length: int = 20) -> tuple[int, int]:
    """(n_chunks, n_keep) with n_chunks = ceil(L / Lc) and n_keep = max(1, floor(n_chunks * (1 - r)))."""
    n_chunks = math.ceil(length / chunk_length)
    return n_chunks, max(1, int(n_chunks * (1 - compression_ratio)))


def chunk_scores(scores: torch.Tensor, chunk_length: int = 20) -> torch.Tensor:
    """Mean token score per chunk; the last, shorter chunk is averaged over its own tokens."""
    length = scores.shape[-1]
    n_chunks = math.ceil(length / chunk_length)
    rest = length - (n_chunks - 1) * chunk_length
    padded = torch.nn.functional.pad(scores, (0, n_chunks * chunk_length - length))
    means = padded.view(n_chunks, chunk_length).sum(-1) / chunk_length
    if rest != chunk_length:
        means[-1] = means[-1] * (chunk_length / rest)
    return means


def chunk_top_k(scores: torch.Tensor, compression_ratio: float, chunk_length: int = 20,
                keep_last: bool = False) -> torch.Tensor:
    """Sorted token indices of the top ``n_keep`` chunks (whole chunks only): the paper's rule.

    When L is not a multiple of Lc the short last chunk is kept only where it ranks, so the kept count is
    ``n_keep * Lc`` or a few tokens fewer (``chunk_slots`` gives the larger). ``keep_last=True`` is a variant,
    not the paper's rule: the short last chunk is always one of the ``n_keep`` (as SnapKV keeps its window).
    """
    length = scores.shape[-1]
    n_chunks, n_keep = n_kept_chunks(length, compression_ratio, chunk_length)
    means = chunk_scores(scores, chunk_length)
    if keep_last and length % chunk_length and n_keep < n_chunks:
        top = torch.cat([means[:-1].topk(n_keep - 1).indices, torch.tensor([n_chunks - 1], device=scores.device)])
    else:
        top = means.topk(n_keep).indices
    top = top.sort().values
    idx = (top[:, None] * chunk_length + torch.arange(chunk_length, device=scores.device)[None]).reshape(-1)
    return idx if length % chunk_length == 0 else idx[idx < length]


def chunk_slots(length: int, compression_ratio: float, chunk_length: int = 20, keep_last: bool = False) -> int:
    """The cache slots a layer of ``length`` tokens gets under ``chunk_top_k``: the most tokens it can keep, the
    same in every layer and batch row (a selection that holds the short last chunk fills the rest with masked
    slots)."""
    n_chunks, n_keep = n_kept_chunks(length, compression_ratio, chunk_length)
    rest = length % chunk_length
    if keep_last and rest and n_keep < n_chunks:
        return (n_keep - 1) * chunk_length + rest
    return min(length, n_keep * chunk_length)


def token_top_k(scores: torch.Tensor, compression_ratio: float) -> torch.Tensor:
    """Sorted indices of the top K tokens (tokenwise selection)."""
    return scores.topk(n_kept_tokens(scores.shape[-1], compression_ratio)).indices.sort().values
