"""Ada-KV over SnapKV (Feng et al., 2024; Li et al., 2024) through the arena interface: SnapKV's scores here; the
head-adaptive allocation is asked for in metadata.yaml (`allocation: head_adaptive`) and applied by the harness."""

import math

import numpy as np

KERNEL = 5  # SnapKV's average-pooling kernel (KVPress's default)


class Method:
    def score(self, layer):
        """Mean attention of the window's queries to each earlier key, avg-pooled (zero padding counted, as
        torch's avg_pool1d does), averaged over each KV head's query group; the window itself is kept."""
        q, k = layer.queries, np.repeat(layer.keys, layer.groups, axis=0)
        w, n = q.shape[1], k.shape[1]
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        logits = np.where(np.triu(np.ones((w, n), dtype=bool), k=n - w + 1), -np.inf, logits)
        attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
        attn /= attn.sum(axis=-1, keepdims=True)
        s = np.pad(attn[..., : n - w].mean(axis=1), ((0, 0), (KERNEL // 2, KERNEL // 2)))
        pooled = sum(s[:, i : i + n - w] for i in range(KERNEL)) / KERNEL
        pooled = pooled.reshape(layer.n_kv_heads, layer.groups, -1).mean(axis=1)
        return np.concatenate([pooled, np.full((layer.n_kv_heads, w), pooled.max() + 1)], axis=1)
