"""wherewhat_a (the arena post's board A winner), as far as the interface allows: SnapKV's window attention says
WHERE the answer is; a reconstruction proxy says WHAT each entry carries; the score is their product."""

import math

import numpy as np

KERNEL = 5  # SnapKV's pooling kernel


def window_attention(layer):
    """(H_kv, L - W) SnapKV scores: window queries' attention, avg-pooled, averaged over each query group."""
    q, k = layer.queries, np.repeat(layer.keys, layer.groups, axis=0)
    w, n = q.shape[1], k.shape[1]
    logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    logits = np.where(np.triu(np.ones((w, n), dtype=bool), k=n - w + 1), -np.inf, logits)
    attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    s = np.pad(attn[..., : n - w].mean(axis=1), ((0, 0), (KERNEL // 2, KERNEL // 2)))
    pooled = sum(s[:, i : i + n - w] for i in range(KERNEL)) / KERNEL
    return pooled.reshape(layer.n_kv_heads, layer.groups, -1).mean(axis=1), w


def reconstruction(layer, n):
    """(H_kv, n) a cheap stand-in for a reconstruction score: how much the entry's value would be missed if it
    were dropped, its value norm scaled by how unlike its neighbours' keys its key is (no replay: the interface
    gives no model forward)."""
    k, v = layer.keys[:, :n], layer.values[:, :n]
    unit = k / (np.linalg.norm(k, axis=-1, keepdims=True) + 1e-6)
    prev = np.concatenate([unit[:, :1], unit[:, :-1]], axis=1)
    distinct = 1.0 - 0.5 * (unit * prev).sum(-1)  # in [0.5, 1.5]
    r = np.linalg.norm(v, axis=-1) * distinct
    return r / (r.mean(axis=-1, keepdims=True) + 1e-6)


class Method:
    def score(self, layer):
        """snapkv score x reconstruction proxy per KV head; the observation window is always kept."""
        snap, w = window_attention(layer)
        scores = snap * reconstruction(layer, snap.shape[1])
        return np.concatenate([scores, np.full((layer.n_kv_heads, w), scores.max() + 1)], axis=1).astype(np.float32)
