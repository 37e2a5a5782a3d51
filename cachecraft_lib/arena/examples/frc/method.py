"""FRC (CacheCraft's evolved policy) as an arena method: per-token scores from the tail attention.

s(t) = 0.55 * local^(t) + 0.30 * density^(t) + 0.15 * maxhead^(t), f^ = f / max|f|, from the group-averaged
attention of the last Q = 64 queries (the layer's observation window) to every key:

    local(t)   = mean over KV heads and the last 32 queries of A[g, q, t]
    abar(t)    = mean over KV heads and all Q queries
    density(t) = centred window mean of abar, Wd = max(3, min(33, 2 * floor(L / 64) + 1)), zero padded
    maxhead(t) = max over KV heads of the mean over queries

The same score for every KV head; the harness keeps the top ``budget`` tokens (tokenwise, as KVPress's
ScorerPress). numpy and math only, as the arena allows.
"""

import math

import numpy as np

WEIGHTS = (0.55, 0.30, 0.15)
LOCAL_WINDOW = 32


def _maxabs(x):
    peak = np.abs(x).max()
    return x / peak if peak > 0 else x


def tail_attention(queries, keys):
    """A[g, q, t] (H_kv, Q, L): the window queries attending to all keys, causal within the window, group-averaged."""
    n_kv, length, dim = keys.shape
    n_q = queries.shape[1]
    q = queries.reshape(n_kv, -1, dim) / math.sqrt(dim)  # query heads grouped by their KV head
    logits = (q @ keys.transpose(0, 2, 1)).reshape(n_kv, -1, n_q, length)
    causal = np.triu(np.ones((n_q, n_q), dtype=bool), k=1)
    logits[..., length - n_q:] = np.where(causal, -np.inf, logits[..., length - n_q:])
    logits -= logits.max(axis=-1, keepdims=True)
    attn = np.exp(logits)
    attn /= attn.sum(axis=-1, keepdims=True)
    return attn.mean(axis=1)


def frc_scores(attn, window=LOCAL_WINDOW, weights=WEIGHTS):
    """Eq. (1) of the paper from tail attention (H_kv, Q, L); shape (L,)."""
    length = attn.shape[-1]
    per_head = attn.mean(axis=1)
    abar = per_head.mean(axis=0)
    wd = max(3, min(33, 2 * (length // 64) + 1))
    density = np.convolve(abar, np.ones(wd), mode="same") / wd
    local = attn[:, -window:, :].mean(axis=(0, 1))
    maxhead = per_head.max(axis=0)
    return weights[0] * _maxabs(local) + weights[1] * _maxabs(density) + weights[2] * _maxabs(maxhead)


class Method:
    """FRC's token scores for each layer (one score per token, shared by the KV heads)."""

    def score(self, layer):
        attn = tail_attention(layer.queries.astype(np.float32), layer.keys.astype(np.float32))
        return frc_scores(attn).astype(np.float32)
