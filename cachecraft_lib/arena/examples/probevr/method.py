"""probevr (the arena post's board B method): a fixed probe text of the method's own, replayed after the context,
says WHERE the facts are (its queries' attention, as KVzip's replay); a reconstruction proxy says WHAT each entry
carries (as wherewhat_a); the score is their product. The probe is fixed in metadata.yaml, never the question."""

import math

import numpy as np

KERNEL = 5  # pooling kernel over neighbouring tokens (SnapKV's)


def probe_attention(layer):
    """(H_kv, L) per KV head: the largest attention any probe token pays each cached entry (KVzip takes the max
    over its replay's queries), avg-pooled over neighbours, averaged over the query group. The probe follows the
    context, so every entry is visible to every probe token (no causal mask inside the context)."""
    q = layer.probe_queries if layer.probe_queries is not None else layer.queries  # no replay: the window's
    k = np.repeat(layer.keys, layer.groups, axis=0)
    logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)  # over the context only: the probe's own tokens are not candidates
    n = k.shape[1]
    s = np.pad(attn.max(axis=1), ((0, 0), (KERNEL // 2, KERNEL // 2)))
    pooled = sum(s[:, i : i + n] for i in range(KERNEL)) / KERNEL
    return pooled.reshape(layer.n_kv_heads, layer.groups, n).mean(axis=1)


def reconstruction(layer):
    """(H_kv, L) how much an entry would be missed if dropped, without a replay: its value norm scaled by how
    unlike its predecessor's key its key is; mean 1 per head (wherewhat_a's factor)."""
    unit = layer.keys / (np.linalg.norm(layer.keys, axis=-1, keepdims=True) + 1e-6)
    prev = np.concatenate([unit[:, :1], unit[:, :-1]], axis=1)
    r = np.linalg.norm(layer.values, axis=-1) * (1.0 - 0.5 * (unit * prev).sum(-1))
    return r / (r.mean(axis=-1, keepdims=True) + 1e-6)


class Method:
    def score(self, layer):
        """probe attention x reconstruction proxy, per KV head (the harness keeps the budget highest)."""
        return (probe_attention(layer) * reconstruction(layer)).astype(np.float32)
