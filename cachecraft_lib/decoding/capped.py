"""Generation under a hard per-layer cap on the KV cache, with the harness owning the decode hook.

KVPress's ``DecodingPress`` trims after the forward that overflows, so the cache a forward attends over
swings between ``target_size`` and ``target_size + compression_interval``, and at single-token steps its
buffered queries all get the current token's rotary position (``decoding/README.md``). Here eviction
happens *before* every forward: when a layer holds ``L`` entries and ``q`` tokens are about to arrive with
``L + q > cap``, the method evicts down to ``cap - q``; so no forward ever sees more than ``cap`` entries.

What the method scores with is recorded by a hook after every forward, prefill included:
- the hidden states and rotary ``(cos, sin)`` of the last ``window`` tokens, each token at its own
  position (so ``TOVAPress``'s or ``RKVPress``'s window attention is rotated correctly);
- if the method asks, the attention every cached token has received so far (H2O's running sum).
Kept indices are sorted, so the cache stays in time order and the newest tokens stay last. Positions
come from the count of tokens fed, never from the cache length. ``slack`` evicts that many entries more
than needed, so a method runs once per ``slack`` decode steps instead of at every one (the cap still holds;
R-KV and KVPress's DecodingPress amortise the same way); it is 0 on the embedded boards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch
from kvpress import ScorerPress
from torch.utils.flop_counter import FlopCounterMode
from transformers import DynamicCache

from ..methods.decode_presses import received_attention
from ..methods.registry import get_method

__all__ = ["CapMethod", "CappedGenerator", "LayerRecord", "cap_method", "ratio_keeping"]


# select(module, keys, values, record, n_keep) -> (B, H_kv, n <= n_keep) indices to keep, sorted
Select = Callable[..., torch.Tensor]


@dataclass
class CapMethod:
    """A decode-time method: a KVPress scorer, the recent tokens it reads, whether it needs H2O's sum.

    ``press=None`` and ``select=None`` is the full cache (never evicts). ``select`` replaces the scorer's top-k
    by the method's own choice (an arena submission's sandboxed ``decode`` hook, validated outside it)."""

    name: str
    press: ScorerPress | None
    window: int = 1
    accumulate: bool = False
    select: Select | None = None

    @property
    def evicts(self) -> bool:
        return self.press is not None or self.select is not None


def cap_method(name: str) -> CapMethod:
    """A fresh ``CapMethod`` for a registered decode-time method (``methods.registry``; presses carry state)."""
    method = get_method(name)
    if not method.decode_time:
        raise ValueError(f"{name} has no decode-time form (it is a prefill press); see methods.registry")
    return CapMethod(name, method.decode(), window=method.decode_window, accumulate=method.decode_accumulate)


@dataclass
class LayerRecord:
    """What the hook recorded for one layer, pruned with its cache."""

    hidden: torch.Tensor | None = None  # (B, w, D) the last w tokens' attention inputs
    cos: torch.Tensor | None = None  # (B, w, d)
    sin: torch.Tensor | None = None
    received: torch.Tensor | None = None  # (B, H_kv, L) attention received so far
    positions: torch.Tensor | None = None  # (B, H_kv, L) the position of every cached entry
    max_len: int = 0  # the largest cache the layer's attention ran over

    def clone(self) -> LayerRecord:
        def c(t):
            return None if t is None else t.clone()

        return LayerRecord(c(self.hidden), c(self.cos), c(self.sin), c(self.received), c(self.positions),
                           self.max_len)


def ratio_keeping(k_len: int, n_keep: int) -> float:
    """The compression ratio under which KVPress keeps exactly ``n_keep`` of ``k_len`` (``int(L * (1 - r))``)."""
    return max(0.0, (k_len - n_keep - 0.5) / k_len)


def _attention_modules(model) -> list:
    return [layer.self_attn for layer in model.model.layers]


@dataclass
class CappedGenerator:
    """Feed tokens and decode greedily with at most ``cap`` KV entries per layer (``cap=None``: no limit)."""

    model: object
    method: CapMethod
    cap: int | None
    chunk: int = 128
    count_flops: bool = False  # count the floating-point work of eviction (``evict_flops``)
    slack: int = 0  # evict ``slack`` entries beyond what the next forward needs: one eviction per ~slack steps
    cache: DynamicCache = field(init=False)
    records: list[LayerRecord] = field(init=False)
    position: int = field(init=False, default=0)
    evict_flops: int = field(init=False, default=0)
    reads: list[int] = field(init=False, default_factory=list)  # entries attended per generated token

    def __post_init__(self) -> None:
        if self.cap is not None and self.cap < 2 * max(self.method.window, 4):
            raise ValueError(f"cap={self.cap} is too small for {self.method.name} (window {self.method.window}); "
                             f"use a cap of at least {2 * max(self.method.window, 4)}")
        self.modules = _attention_modules(self.model)
        self.reset()

    def reset(self) -> None:
        """Forget everything fed so far."""
        self.cache = DynamicCache()
        self.records = [LayerRecord() for _ in self.modules]
        self.position = 0
        self.reads = []

    def snapshot(self) -> tuple:
        """The state after the context, to answer several questions from the same cache."""
        layers = [(la.keys.clone(), la.values.clone()) for la in self.cache.layers]
        return layers, [r.clone() for r in self.records], self.position

    def restore(self, state: tuple) -> None:
        layers, records, position = state
        self.cache = DynamicCache()
        for i, (k, v) in enumerate(layers):
            self.cache.update(k.clone(), v.clone(), i)
        self.records = [r.clone() for r in records]
        self.position = position
        self.reads = []

    def max_cache_lengths(self) -> list[int]:
        """Per layer, the largest number of KV entries any forward attended over."""
        return [r.max_len for r in self.records]

    def entries(self) -> int:
        """KV entries the cache holds now, over all layers and KV heads."""
        return sum(la.keys.shape[1] * la.keys.shape[2] for la in self.cache.layers
                   if getattr(la, "is_initialized", False))

    # ------------------------------------------------------------------ feeding
    def piece_size(self) -> int:
        return self.chunk if self.cap is None else max(1, min(self.chunk, self.cap // 2))

    @torch.no_grad()
    def feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Feed ``ids`` (1, n) in pieces, evicting before each so that no layer exceeds the cap; the last logits."""
        logits = None
        step = self.piece_size()
        for start in range(0, ids.shape[1], step):
            logits = self._forward(ids[:, start:start + step])
        if logits is None:
            raise ValueError("feed() needs at least one token")
        return logits

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, max_new_tokens: int, stop: set[int]) -> list[int]:
        """Feed ``ids`` (the question) then decode greedily, one token per forward, under the cap."""
        token = int(self.feed(ids).argmax())
        self.reads.append(self.entries())
        out = [token]
        while len(out) < max_new_tokens and token not in stop:
            token = int(self._forward(torch.tensor([[token]], device=ids.device)).argmax())
            self.reads.append(self.entries())
            out.append(token)
        return out

    def _forward(self, ids: torch.Tensor) -> torch.Tensor:
        q = ids.shape[1]
        if self.cap is not None and self.method.evicts:
            self._evict(q)
        positions = torch.arange(self.position, self.position + q, device=ids.device)[None]
        with self._recording():
            out = self.model(input_ids=ids, past_key_values=self.cache, position_ids=positions, logits_to_keep=1)
        self.position += q
        return out.logits[0, -1]

    # ------------------------------------------------------------------ eviction
    def _evict(self, incoming: int) -> None:
        for module, layer, record in zip(self.modules, self.cache.layers, self.records, strict=False):
            if not getattr(layer, "is_initialized", False):
                continue
            k_len = layer.keys.shape[2]
            if k_len + incoming <= self.cap:
                continue
            n_keep = max(1, self.cap - incoming - self.slack)
            with FlopCounterMode(display=False) if self.count_flops else nullcontext() as counter:
                kept = self._select(module, layer.keys, layer.values, record, n_keep)
            if counter is not None:
                self.evict_flops += counter.get_total_flops()
            index = kept.unsqueeze(-1).expand(-1, -1, -1, layer.keys.shape[-1])
            layer.keys = layer.keys.gather(2, index).contiguous()
            layer.values = layer.values.gather(2, index).contiguous()
            if record.received is not None:
                record.received = record.received.gather(-1, kept)
            record.positions = record.positions.gather(-1, kept)

    def _select(self, module, keys, values, record: LayerRecord, n_keep: int) -> torch.Tensor:
        """Indices (B, H_kv, n_keep) of the entries to keep, in time order."""
        if self.method.select is not None:
            kept = self.method.select(module, keys, values, record, n_keep)
            if kept.ndim != 3 or kept.shape[:2] != keys.shape[:2] or not 0 < kept.shape[-1] <= n_keep:
                raise ValueError(f"{self.method.name}: select returned indices of shape {tuple(kept.shape)}; "
                                 f"expected ({keys.shape[0]}, {keys.shape[1]}, n) with 0 < n <= {n_keep}")
            return kept.sort(dim=-1).values
        press = self.method.press
        press.compression_ratio = ratio_keeping(keys.shape[2], n_keep)
        try:
            kwargs = {"position_embeddings": (record.cos, record.sin)}
            attentions = record.received if self.method.accumulate else None
            scores = press.score(module, record.hidden, keys, values, attentions, kwargs)
        finally:
            press.compression_ratio = 0.0
        return scores.topk(n_keep, dim=-1).indices.sort(dim=-1).values

    # ------------------------------------------------------------------ recording
    @contextmanager
    def _recording(self) -> Iterator[None]:
        hooks = [m.register_forward_hook(self._record, with_kwargs=True) for m in self.modules]
        try:
            yield
        finally:
            for h in hooks:
                h.remove()

    def _record(self, module, args, kwargs, output) -> None:
        record = self.records[module.layer_idx]
        keys = kwargs["past_key_values"].layers[module.layer_idx].keys
        record.max_len = max(record.max_len, keys.shape[2])
        hidden = kwargs["hidden_states"].detach()
        cos, sin = kwargs["position_embeddings"]
        w = self.method.window
        record.hidden = _tail(record.hidden, hidden, w)
        record.cos, record.sin = _tail(record.cos, cos, w), _tail(record.sin, sin, w)
        q = hidden.shape[1]
        new = torch.arange(self.position, self.position + q, device=keys.device)
        new = new.expand(keys.shape[0], keys.shape[1], q)
        record.positions = new if record.positions is None else torch.cat([record.positions, new], dim=-1)
        if self.method.accumulate:
            step = received_attention(module, hidden, keys, None, kwargs)
            if record.received is not None:
                step[..., : record.received.shape[-1]] += record.received
            record.received = step


def _tail(previous: torch.Tensor | None, new: torch.Tensor, n: int) -> torch.Tensor:
    """The last ``n`` rows (dim 1) of ``previous`` followed by ``new``."""
    joined = new if previous is None else torch.cat([previous, new], dim=1)
    return joined[:, -n:].clone()
