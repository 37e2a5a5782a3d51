"""spanvote (the arena post's method): every KV head of every layer votes on where the answer is, and each head
keeps by the larger of its own score and the voted one. It needs the whole cache (``whole_cache``: every layer
before any is decided), so it runs on the boards whose rules allow a one-off compression (B_offline)."""

import math

import numpy as np

KERNEL = 5  # SnapKV's pooling kernel for each head's own score
SPAN = (0.25, 0.5, 1.0, 0.5, 0.25)  # span propagation: a voted token lifts its neighbours (the digits around it)


def own_scores(layer):
    """(H_kv, L - W) each KV head's window attention (SnapKV's), normalised to mean 1 over the tokens, and W."""
    q, k = layer.queries, np.repeat(layer.keys, layer.groups, axis=0)
    w, n = q.shape[1], k.shape[1]
    logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    logits = np.where(np.triu(np.ones((w, n), dtype=bool), k=n - w + 1), -np.inf, logits)
    attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    s = np.pad(attn[..., : n - w].mean(axis=1), ((0, 0), (KERNEL // 2, KERNEL // 2)))
    pooled = sum(s[:, i : i + n - w] for i in range(KERNEL)) / KERNEL
    pooled = pooled.reshape(layer.n_kv_heads, layer.groups, -1).mean(axis=1)
    return pooled / (pooled.mean(axis=1, keepdims=True) + 1e-12), w


def importance(scores):
    """(H_kv,) how sharply each head points at a few tokens: 1 - entropy / log(L) of its normalised score.
    A head that spreads its attention evenly says nothing about where the answer is and gets almost no vote."""
    p = scores / scores.sum(axis=1, keepdims=True)
    entropy = -(p * np.log(p + 1e-12)).sum(axis=1)
    return np.clip(1.0 - entropy / math.log(p.shape[1]), 0.0, None)


def propagate(vote):
    """(L,) the vote spread to neighbouring tokens, each token taking its strongest neighbour's share."""
    half = len(SPAN) // 2
    padded = np.pad(vote, half)
    return np.max([w * padded[i : i + vote.size] for i, w in enumerate(SPAN)], axis=0)


class Method:
    def whole_cache(self, layers):
        """One vote over every head of every layer, weighted by each head's importance; per head the max of
        its own score and the vote (both mean 1 over the tokens); the observation window is always kept."""
        own = [own_scores(layer) for layer in layers]
        weights = np.concatenate([importance(s) for s, _ in own])
        heads = np.concatenate([s for s, _ in own])
        vote = (weights[:, None] * heads).sum(axis=0) / (weights.sum() + 1e-12)
        vote = propagate(vote / (vote.mean() + 1e-12))
        answers = []
        for (scores, w), layer in zip(own, layers, strict=True):
            kept = np.maximum(scores, vote[None, :])
            pinned = np.full((layer.n_kv_heads, w), kept.max() + 1.0)
            answers.append(np.concatenate([kept, pinned], axis=1).astype(np.float32))
        return answers
