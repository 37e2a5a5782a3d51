"""Board C example: attention sinks, a recent window, and the rest by what the newest queries attend to."""

import numpy as np

SINKS = 4  # the first tokens soak up attention (StreamingLLM); evicting them derails the model
RECENT = 0.25  # share of the budget kept for the newest entries (local context of the next token)


class Method:
    def decode(self, layer):
        """Scores per KV head: sinks and the newest quarter of the budget first, then window-query attention."""
        heads, n, dim = layer.keys.shape
        q = layer.queries.reshape(heads, layer.groups * layer.queries.shape[1], dim)
        logits = np.einsum("hqd,hld->hql", q, layer.keys) / np.sqrt(dim)
        logits -= logits.max(axis=-1, keepdims=True)
        attn = np.exp(logits)
        attn /= attn.sum(axis=-1, keepdims=True)
        scores = attn.mean(axis=1)  # (H_kv, L): mean over the window's queries and the group's heads
        order = np.argsort(layer.positions, axis=1)  # entries by position (time order, per head)
        protected = np.zeros_like(scores, dtype=bool)
        recent = max(1, int(RECENT * layer.budget))
        rows = np.arange(heads)[:, None]
        protected[rows, order[:, :SINKS]] = True
        protected[rows, order[:, -recent:]] = True
        return np.where(protected, 2.0 + scores, scores).astype(np.float32)
