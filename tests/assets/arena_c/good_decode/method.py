import numpy as np


class Method:
    """Keep the 4 oldest entries (attention sinks) and, of the rest, the most attended by the window queries."""

    def decode(self, layer):
        heads, _, dim = layer.keys.shape
        q = layer.queries.reshape(heads, layer.groups * layer.queries.shape[1], dim)
        logits = np.einsum("hqd,hld->hql", q, layer.keys) / np.sqrt(dim)
        logits -= logits.max(axis=-1, keepdims=True)
        attn = np.exp(logits)
        attn /= attn.sum(axis=-1, keepdims=True)
        scores = attn.mean(axis=1)
        scores[:, :4] = np.inf
        scores[:, -8:] = np.inf
        return np.nan_to_num(scores, posinf=1e9)
