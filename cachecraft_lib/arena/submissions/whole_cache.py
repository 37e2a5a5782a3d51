"""Hook 2, the whole cache: ``Method.whole_cache(layers)`` sees every layer of a context before it decides any.

Why: a method such as the post's spanvote lets every head of every layer vote on where the answer is, so its
choice for layer 0 depends on the last layer; the per-layer hooks (``score``/``keep``) decide layer k before layer
k+1 is seen. The price is a one-off compression after the whole prefill, which only boards whose rules allow it
run (``Board.allows_whole_cache``: ``hooks_allowed: [whole_cache]`` in the board's YAML; B_offline in every
profile). Elsewhere the submission's ``score``/``keep`` runs, or, if it has neither, the board refuses it
(``not_allowed``).

The press records each layer's inputs (keys and values after RoPE, the last ``window`` queries after RoPE,
positions) as the prefill passes (``compress`` returns the layer unchanged), then, once the last layer is seen,
sends them all to the method's sandbox in one call (``MethodSandbox.call_whole``: CPU limit = the per-layer limit
times the layers, within the evaluation's wall budget and the sandbox's memory). The answer, one per layer, is
float scores ((L,) or (H_kv, L): the ``budget`` highest per head are kept, ties to the earlier entry) or integer
indices ((n,) or (H_kv, n), unique, in range, at most ``budget``) or a ``method_api.Rewrite`` of indices with
new keys/values for the kept entries, validated here as the ``keep`` press validates its own (``press.apply_keep``);
the press then shrinks every layer of the cache to the kept (or rewritten) entries. The call's wall seconds are kept in ``charged_seconds``; the board runner
charges them as compression overhead at the context's own prefill rate (seconds x prefill FLOPs / prefill
seconds), since the sandbox's work has no FLOP count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kvpress import BasePress
from kvpress.utils import compute_n_kept

from .folder import Submission, SubmissionError
from .press import WINDOW, apply_keep, key_positions, sandbox_for, window_queries
from .sandbox import FLOAT_DTYPES, Limits, validate_indices, validate_scores


def pack(layers: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every layer's arrays in one frame: ``keys.0``, ``values.0``, ..., ``positions.<n-1>``."""
    return {f"{name}.{i}": a for i, layer in enumerate(layers) for name, a in layer.items()}


def layer_choice(out: np.ndarray, heads: int, tokens: int, budget: int) -> np.ndarray:
    """(H_kv, n) sorted indices a layer keeps from one answer: scores (top ``budget`` per head) or indices."""
    if out.dtype.name in FLOAT_DTYPES:
        scores = validate_scores(out, heads, tokens)
        return np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :budget], axis=1)
    return validate_indices(out, heads, tokens, budget)


def split_whole(out: dict[str, np.ndarray], n_layers: int, heads: int, tokens: int,
                budget: int) -> list[dict[str, np.ndarray]]:
    """Each layer's answer from ``whole_cache``'s reply as ``keep`` parts: ``out`` the (H_kv, n) indices (scores
    turned into their top ``budget`` per head), with a ``Rewrite``'s ``keys``/``values`` (indices only)."""
    names = {f"{p}.{i}" for i in range(n_layers) for p in ("out", "keys", "values")}
    if not {f"out.{i}" for i in range(n_layers)} <= set(out) or not set(out) <= names:
        raise SubmissionError("bad_output", f"whole_cache() must answer every one of the {n_layers} layers once; "
                                            f"got {len([k for k in out if k.startswith('out.')])} answers")
    layers = []
    for i in range(n_layers):
        raw = out[f"out.{i}"]
        rewrite = {p: out[f"{p}.{i}"] for p in ("keys", "values") if f"{p}.{i}" in out}
        try:
            if rewrite and raw.dtype.name in FLOAT_DTYPES:
                raise SubmissionError("bad_output", "a Rewrite needs integer indices, not scores")
            kept = layer_choice(raw, heads, tokens, budget)
        except SubmissionError as err:
            raise SubmissionError(err.kind, f"whole_cache() layer {i}: {err}") from None
        layers.append({"out": raw if rewrite else kept, **rewrite})
    return layers


@dataclass
class SubmissionWholeCachePress(BasePress):
    """A submission's ``whole_cache`` as a KVPress press: records every layer, decides once at the last."""

    submission: Submission = None
    compression_ratio: float = 0.0
    window: int = WINDOW
    limits: dict = field(default_factory=dict)
    n_layers: int = 0
    charged_seconds: float = 0.0
    _recorded: list = field(default_factory=list, repr=False)

    def post_init_from_model(self, model: Any) -> None:
        self.n_layers = int(model.config.num_hidden_layers)
        self._recorded = []
        self.charged_seconds = 0.0

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if self.compression_ratio == 0:
            return keys, values
        if int(module.layer_idx) == 0:
            self._recorded = []
        queries = window_queries(module, hidden_states, kwargs, self.window).float().cpu().numpy()
        positions = key_positions(kwargs, keys.shape[2], keys.shape[0])
        k, v = keys.float().cpu().numpy(), values.float().cpu().numpy()
        self._recorded.append([{"keys": k[b], "values": v[b], "queries": queries[b], "positions": positions[b]}
                               for b in range(keys.shape[0])])
        return keys, values  # every layer is decided in finish_cache, once the last one is seen

    def forward_hook(self, module, input, kwargs, output):
        """A live prefill (``with press(model)``): after the last layer, shrink the cache the model wrote."""
        output = super().forward_hook(module, input, kwargs, output)
        if int(module.layer_idx) == self.n_layers - 1 and len(self._recorded) == self.n_layers:
            self.finish_cache(kwargs["past_key_values"])
        return output

    def finish_cache(self, cache: Any) -> None:
        """Call ``whole_cache`` once per batch row with every layer, validate, keep the chosen entries."""
        if self.compression_ratio == 0 or not self._recorded:
            return
        recorded, self._recorded = self._recorded, []
        if len(recorded) != self.n_layers:
            raise RuntimeError(f"whole_cache recorded {len(recorded)} of {self.n_layers} layers")
        first = cache.layers[0].keys
        heads, tokens = first.shape[1], first.shape[2]
        budget = compute_n_kept(tokens, self.compression_ratio)
        box = sandbox_for(self.submission, Limits.of(**self.limits))
        rows = []
        for b in range(first.shape[0]):
            start = time.perf_counter()
            try:
                out = box.call_whole(pack([layer[b] for layer in recorded]), budget=int(budget), layer=0,
                                     n_layers=self.n_layers, compression_ratio=float(self.compression_ratio))
            finally:
                self.charged_seconds += time.perf_counter() - start
            rows.append(split_whole(out, self.n_layers, heads, tokens, budget))
        for i in range(self.n_layers):
            layer = cache.layers[i]
            try:  # the keep press's own gather and Rewrite checks (shape, float32, finite, bounded, cast-safe)
                layer.keys, layer.values = apply_keep([r[i] for r in rows], layer.keys, layer.values, budget)
            except SubmissionError as err:
                raise SubmissionError(err.kind, f"whole_cache() layer {i}: {err}") from None


def whole_cache_press(sub: Submission, compression_ratio: float, window: int = WINDOW, **limits: Any) -> BasePress:
    """The submission's ``whole_cache`` hook as a press at ``compression_ratio`` (fraction evicted)."""
    Limits.of(**limits)
    return SubmissionWholeCachePress(submission=sub, compression_ratio=compression_ratio, window=window,
                                     limits=dict(limits))


def not_allowed(name: str):
    """A ``build`` for boards that do not allow the hook, for a submission that has no per-layer hook."""
    def build(ratio: float) -> BasePress:
        raise SubmissionError("not_allowed", f"{name} defines only whole_cache(layers), which runs only on boards "
                                             "whose rules allow a slow one-off compression (B_offline); define "
                                             "score(layer) or keep(layer) for the other boards")

    return build

