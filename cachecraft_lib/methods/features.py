"""The per-layer feature context that eviction policies read.

One attention pass per layer: the last Q context positions (default 64) are re-projected to
queries, RoPE is re-applied at their true positions (as KVPress's SnapKV does), they attend
causally to all L keys, and the result is averaged over each GQA group: A~[g, q, t], shape
(H_kv, Q, L). Every attention feature below is derived from that one tensor; key/value features
read the cache. All in torch on the model's device, with no loop over tokens.

The 17 token-level features (each an array of length L; "raw" = not normalised):

==================  ==========================================================================
local_attn          mean over g and the last W (=32) queries of A~[g,q,t]; raw
global_attn         abar(t) = mean over g and all Q queries of A~[g,q,t]; raw
density             (1/Wd) sum_{|tau-t|<=Wd//2} abar(tau), zero padding, Wd = max(3, min(33, 2*floor(L/64)+1))
max_head            max over g of mean_q A~[g,q,t]  (the most attentive KV head); raw
head_consistency    fraction of KV heads whose own top-K tokens (by mean_q A~[g,q,t]) contain t; in [0,1]
head_concentration  max_g m_g(t) / sum_g m_g(t) with m_g(t) = mean_q A~[g,q,t]; 1/H_kv (even) .. 1 (one head)
last_query_attn     mean over g of A~[g, Q-1, t]: attention of the last context token (TOVA-like); raw
query_variance      variance over the Q queries of mean_g A~[g,q,t]: how unstable the attention to t is
key_norm            mean over KV heads of ||k_t||_2 (post-RoPE keys; RoPE preserves the norm)
key_change          mean over KV heads of ||k_t - k_{t-1}||_2, 0 at t = 0
value_norm          mean over KV heads of ||v_t||_2
chunk_mean          mean of global_attn over t's chunk of Lc (=20) tokens (the last chunk may be shorter)
chunk_rank          rank of t's chunk by chunk_mean, scaled to [0,1]: 1 = best chunk, 0 = worst
position            t (0-based absolute position)
rel_position        t / (L - 1)  (0 for L = 1)
sink_mask           1 for t < 4 (attention sinks), else 0
recent_mask         1 for t >= L - W (the W most recent tokens), else 0
==================  ==========================================================================

Scalars: L (tokens in the layer's cache), K = max(1, floor(L*(1-r))) tokens to keep, H (KV heads),
Q (queries in the pass), layer (index). Policies see numpy float32 arrays (``FeatureContext``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from .frc import chunk_scores, density, n_kept_tokens

FEATURES: tuple[str, ...] = (
    "local_attn", "global_attn", "density", "max_head", "head_consistency", "head_concentration",
    "last_query_attn", "query_variance", "key_norm", "key_change", "value_norm", "chunk_mean", "chunk_rank",
    "position", "rel_position", "sink_mask", "recent_mask",
)
SCALARS: tuple[str, ...] = ("L", "K", "H", "Q", "layer")
N_SINK = 4


def feature_table() -> list[dict[str, str]]:
    """The feature definitions of this module's docstring as rows (name, definition) for notebooks."""
    rows = []
    for line in (__doc__ or "").splitlines():
        name = line.split(" ", 1)[0]
        if name in FEATURES and line[len(name):].startswith("  "):
            rows.append({"feature": name, "definition": line[len(name):].strip()})
    return rows


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def tail_attention(module: torch.nn.Module, hidden_states: torch.Tensor, keys: torch.Tensor,
                   position_embeddings: tuple[torch.Tensor, torch.Tensor], n_queries: int = 64,
                   row: int = 0) -> torch.Tensor:
    """A~[g, q, t]: the last ``n_queries`` positions attending to all keys, group-averaged; (H_kv, Q, L), fp32.

    One batch row (``row``). The queries are the last hidden states given, which are the last keys of the
    cache: the whole prefill, or a decoding press's buffer of recent tokens (then Q <= the buffer's length and
    ``position_embeddings`` must cover the buffer: see ``buffer_position_embeddings``).
    """
    from kvpress.utils import get_prerope_query_states

    length = keys.shape[2]
    q_len = min(n_queries, length, hidden_states.shape[1])
    query = get_prerope_query_states(module, hidden_states[row:row + 1, -q_len:])  # (1, H, Q, d)
    cos, sin = position_embeddings
    r = min(row, cos.shape[0] - 1)  # position embeddings may be shared by the batch
    cos, sin = cos[r:r + 1, -q_len:].unsqueeze(1), sin[r:r + 1, -q_len:].unsqueeze(1)
    query = (query * cos + rotate_half(query) * sin)[0] * (1.0 / math.sqrt(keys.shape[3]))  # scale the small side
    n_kv = keys.shape[1]
    query = query.reshape(n_kv, -1, keys.shape[3])  # (H_kv, G*Q, d): no repeat_kv copy of the keys
    # matmul in the model's dtype (as SnapKV does), softmax in float32
    logits = torch.matmul(query, keys[row].transpose(1, 2)).view(n_kv, -1, q_len, length)
    causal = torch.ones(q_len, q_len, dtype=torch.bool, device=keys.device).triu_(1)  # only the last Q keys
    logits[..., length - q_len:].masked_fill_(causal, float("-inf"))
    return logits.softmax(dim=-1, dtype=torch.float32).mean(dim=1)


def buffer_position_embeddings(module: torch.nn.Module, hidden_states: torch.Tensor,
                               kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE (cos, sin) for every hidden state a press receives. In a prefill these are the layer's own; a
    decoding press passes a buffer of recent tokens with the current step's single position, so the buffer's
    positions (the current one and those before it) are rebuilt from the model's rotary embedding."""
    cos, sin = kwargs["position_embeddings"]
    n = hidden_states.shape[1]
    if cos.shape[1] == n:
        return cos, sin
    last = kwargs["position_ids"][:, -1:] if kwargs.get("position_ids") is not None else \
        kwargs["cache_position"][-1:].view(1, 1)
    positions = last - torch.arange(n - 1, -1, -1, device=hidden_states.device)[None]
    return module.rotary_emb(hidden_states, positions)


@dataclass
class FeatureContext:
    """What a policy program sees for one layer: 17 arrays of length L and 5 scalars (read-only copies)."""

    features: dict[str, np.ndarray]
    L: int
    K: int
    H: int
    Q: int
    layer: int
    compression_ratio: float
    chunk_length: int = 20
    window: int = 32
    extra: dict = field(default_factory=dict)

    def __getattr__(self, name: str) -> np.ndarray:
        features = self.__dict__.get("features", {})
        if name in features:
            return features[name]
        raise AttributeError(f"FeatureContext has no feature {name!r}; features: {', '.join(FEATURES)}")

    def __getitem__(self, name: str) -> np.ndarray:
        return self.features[name]

    def scalars(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in SCALARS}


def token_features(attn: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, compression_ratio: float,
                   window: int = 32, chunk_length: int = 20) -> dict[str, torch.Tensor]:
    """The 17 token features (torch, on the input device) from tail attention (H_kv, Q, L) and the cache."""
    n_kv, _, length = attn.shape
    per_head = attn.mean(dim=1)  # m_g(t), (H_kv, L)
    abar = per_head.mean(dim=0)
    k_budget = n_kept_tokens(length, compression_ratio)
    top = per_head.topk(min(k_budget, length), dim=-1).indices
    in_top = torch.zeros_like(per_head).scatter_(-1, top, 1.0)
    k0, v0 = keys[0].float(), values[0].float()
    change = torch.zeros(length, device=attn.device)
    if length > 1:
        change[1:] = (k0[:, 1:] - k0[:, :-1]).norm(dim=-1).mean(dim=0)
    c_scores = chunk_scores(abar, chunk_length)
    chunk_of = torch.arange(length, device=attn.device) // chunk_length
    order = c_scores.argsort().argsort().float()  # 0 = worst chunk
    pos = torch.arange(length, device=attn.device, dtype=torch.float32)
    return {
        "local_attn": attn[:, -window:, :].mean(dim=(0, 1)),
        "global_attn": abar,
        "density": density(abar),
        "max_head": per_head.max(dim=0).values,
        "head_consistency": in_top.mean(dim=0),
        "head_concentration": per_head.max(dim=0).values / per_head.sum(dim=0).clamp_min(1e-30),
        "last_query_attn": attn[:, -1, :].mean(dim=0),
        "query_variance": attn.mean(dim=0).var(dim=0, unbiased=False),
        "key_norm": k0.norm(dim=-1).mean(dim=0),
        "key_change": change,
        "value_norm": v0.norm(dim=-1).mean(dim=0),
        "chunk_mean": c_scores[chunk_of],
        "chunk_rank": (order / max(len(c_scores) - 1, 1))[chunk_of],
        "position": pos,
        "rel_position": pos / max(length - 1, 1),
        "sink_mask": (pos < N_SINK).float(),
        "recent_mask": (pos >= length - window).float(),
    }


def build_context(attn: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, compression_ratio: float,
                  layer: int, window: int = 32, chunk_length: int = 20) -> FeatureContext:
    """A ``FeatureContext`` of numpy float32 copies (the policy can neither see nor change the cache)."""
    feats = token_features(attn, keys, values, compression_ratio, window, chunk_length)
    arrays = {name: feats[name].detach().float().cpu().numpy().copy() for name in FEATURES}
    for array in arrays.values():
        array.setflags(write=False)
    length = attn.shape[-1]
    return FeatureContext(arrays, L=length, K=n_kept_tokens(length, compression_ratio), H=attn.shape[0],
                          Q=attn.shape[1], layer=layer, compression_ratio=compression_ratio,
                          chunk_length=chunk_length, window=window)


def layer_contexts(layers: Iterable[tuple], compression_ratio: float, n_queries: int = 64, window: int = 32,
                   chunk_length: int = 20) -> list[tuple[torch.Tensor, FeatureContext]]:
    """Tail attention and feature context of every layer captured by ``prefill.SharedPrefill``
    (``(module, hidden, keys, values, kwargs)`` tuples): the one place a prefill becomes what a policy sees."""
    out = []
    with torch.no_grad():
        for module, hidden, keys, values, kwargs in layers:
            attn = tail_attention(module, hidden, keys, kwargs["position_embeddings"], n_queries)
            out.append((attn, build_context(attn, keys, values, compression_ratio, module.layer_idx, window,
                                            chunk_length)))
    return out
