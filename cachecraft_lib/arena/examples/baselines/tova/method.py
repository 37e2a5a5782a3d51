"""TOVA (Oren et al., 2024) through the arena interface: the newest token's attention, averaged over all heads."""

import math

import numpy as np


class Method:
    def score(self, layer):
        """The last query's softmax attention to every earlier key, averaged over every query head (one score
        shared by all KV heads); the newest entry itself scores above all."""
        q = layer.queries[:, -1:, :]  # (H_q, 1, D)
        k = np.repeat(layer.keys, layer.groups, axis=0)
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
        attn /= attn.sum(axis=-1, keepdims=True)
        shared = attn[:, 0, :-1].mean(axis=0)  # (L - 1,)
        row = np.concatenate([shared, [shared.max() + 1]])
        return np.repeat(row[None], layer.n_kv_heads, axis=0).astype(np.float32)
