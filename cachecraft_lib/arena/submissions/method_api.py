"""The method interface of an arena submission: what ``method.py``'s ``Method`` receives and may return.

``method.py`` defines ``class Method`` with a no-argument constructor and exactly one of

    def score(self, layer: Layer) -> array   # per-token scores: (L,) for every KV head, or (H_kv, L)
    def keep(self, layer: Layer) -> array    # indices to keep: (n,) for every KV head, or (H_kv, n), n <= budget

called once per attention layer (and batch row) of every compressed prefill, in order of layers. ``Layer``:

- ``keys``, ``values``: (H_kv, L, D) float32, the layer's cache after RoPE;
- ``queries``: (H_q, W, D) float32, the last W (observation-window) queries after RoPE; H_q = groups * H_kv;
- ``positions``: (L,) int64, the position of each cached token (``decode``: (H_kv, L));
- ``budget``: entries to keep per KV head (KVPress's ``int(L * (1 - compression_ratio))``);
- ``layer`` (index), ``n_layers``, ``compression_ratio``.

With ``score`` the harness keeps the ``budget`` highest scores per head (as KVPress's ``ScorerPress`` does, so
the method composes with KVPress's wrappers: AdaKV's head-wise budgets, ChunkKV, DecodingPress); with
``keep`` it keeps exactly those indices. Scores must be finite; indices integers in ``[0, L)``, unique per
head, at most ``budget`` and at least one, the same count for every head. The arrays are read-only
(writing to them is ``tampering``); the method may keep state between calls (``self``). It may import only
numpy, math and a few pure standard modules (``submission.ALLOWED_IMPORTS``); no torch, files, network or
processes. Everything it returns is validated outside its process.

**Decode-time boards (C).** ``Method`` also defines (and a submission naming board C must define)

    def decode(self, layer: Layer) -> array  # float scores (L,) or (H_kv, L), or integer indices (H_kv, n)

called by the harness's capped generator whenever a layer's cache would overflow the cap: before a forward
of ``q`` new tokens onto ``L`` cached entries with ``L + q > cap``, once per layer, with ``budget = cap - q``
(the entries to keep per KV head). ``queries`` are the last W tokens' queries, each rotated at its own
position (W = 8, the window R-KV uses; fewer at the start); ``positions`` (H_kv, L) give every cached entry's
position (after evictions they are not consecutive, and differ per head). A float answer is scores (the
harness keeps the ``budget`` highest per head); an integer answer is the indices to keep (unique, in range,
at most ``budget``). It runs in the same sandbox, is validated outside it, and the harness checks the cap on
the cache tensors after every eviction. ``compression_ratio`` is ``1 - budget / L``.

**Rewrite.** ``keep`` may return ``Rewrite(indices, keys=None, values=None)`` instead of the indices: with the
entries it keeps, new contents for them (e.g. evicted entries merged into kept ones, as KVPress's MergingPress
does). ``keys``/``values`` are (H_kv, n, D) float32, row ``j`` of head ``h`` replacing entry ``indices[h, j]``
(indices as ``keep`` returns them, (H_kv, n); any order, the harness sorts both together), finite, also once
cast to the cache's dtype; either may be omitted (that half is gathered unchanged). They are validated outside
the sandbox and written into the cache by the press; the cache holds ``n`` entries per head as with ``keep``.

**Probes.** A submission may declare up to 4 probe texts in ``metadata.yaml`` (``probes: ["List every name ..."]``,
at most 400 characters and 128 tokens each). The harness prefills the whole context, runs each probe through the
model after it (on a copy of the cache, as KVzip's replay), and calls ``score``/``keep`` once per layer with
``probe_queries`` (H_q, P, D) float32, the probes' queries after RoPE, concatenated, and ``probe_lengths`` (n,)
int64; without probes both are None. On query-agnostic boards a probe containing a question is refused.

**Whole cache (boards whose rules allow a one-off compression: B_offline).** ``Method`` may define

    def whole_cache(self, layers: tuple[Layer, ...]) -> list   # one answer per layer, in layer order

called once per context (and batch row) after the whole prefill, with every layer's ``Layer`` (same fields as
above, ``layer`` set per layer); each answer is scores, indices or a ``Rewrite``, as ``score``/``keep`` return
them. Its CPU limit is the per-layer limit times the layers; its seconds count as compression overhead. On other
boards ``score``/``keep`` runs instead, and a method with only ``whole_cache`` is refused (``not_allowed``).

**Parameters.** A submission that ships ``params.npz`` is built as ``Method(params)``: ``params`` is a read-only
mapping of read-only numeric arrays (``arena.params``); without the file, ``Method()``.

This module is imported both by the harness and, on its own, by the sandbox child (numpy only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layer:
    """One attention layer's inputs to a method (read-only arrays; see the module doc)."""

    keys: np.ndarray
    values: np.ndarray
    queries: np.ndarray
    positions: np.ndarray
    budget: int
    layer: int
    n_layers: int
    compression_ratio: float
    probe_queries: np.ndarray | None = None  # (H_q, P, D) the probes' queries after RoPE (metadata ``probes``)
    probe_lengths: np.ndarray | None = None  # (n_probes,) tokens of each probe in ``probe_queries``

    @property
    def n_tokens(self) -> int:
        return int(self.keys.shape[1])

    @property
    def n_kv_heads(self) -> int:
        return int(self.keys.shape[0])

    @property
    def groups(self) -> int:
        """Query heads per KV head (grouped-query attention)."""
        return int(self.queries.shape[0] // self.keys.shape[0])


@dataclass(frozen=True)
class Rewrite:
    """``keep``'s answer with new contents for the kept entries (see the module doc)."""

    indices: np.ndarray
    keys: np.ndarray | None = None
    values: np.ndarray | None = None


ARRAYS = ("keys", "values", "queries", "positions")
SCALARS = ("budget", "layer", "n_layers", "compression_ratio")
HOOKS = ("score", "keep", "decode")
