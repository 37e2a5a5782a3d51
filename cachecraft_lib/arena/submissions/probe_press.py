"""A submission with probes as a KVPress press: prefill the context whole, replay each probe after it, then compress.

Why its own prefill (``Contender.own_prefill``, as KVzip's): a probe's queries at layer ``l`` depend on every
layer below ``l`` having seen the whole, uncompressed context, so no layer can be compressed while the context is
prefilled. The press (1) records each layer's window queries and positions during the prefill, (2) runs every
probe through the model on a copy of the cache (the context's cache is never extended by a probe), recording the
probe's queries after RoPE per layer, (3) calls the method per layer with ``layer.probe_queries`` (H_q, P, D: the
probes' tokens concatenated) and ``layer.probe_lengths`` (tokens per probe), and (4) writes what it keeps (scores:
the ``budget`` highest per head; ``keep``: those indices, a ``Rewrite`` included) into the cache. The probes'
forwards run under the runner's FLOP counter, so their cost is in the overhead term (``overhead_flops``).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MethodType
from typing import Any

import numpy as np
import torch
from kvpress import BasePress
from kvpress.utils import compute_n_kept

from .folder import Submission, SubmissionError
from .press import WINDOW, apply_keep, key_positions, sandbox_for, window_queries
from .probes import probe_ids
from .sandbox import Limits, validate_scores


@dataclass
class SubmissionProbePress(BasePress):
    """The submission's ``score``/``keep`` after a full prefill and its probes' replay (see the module doc)."""

    submission: Submission = None
    compression_ratio: float = 0.0
    window: int = WINDOW
    limits: dict = field(default_factory=dict)
    tokenizer: Any = None
    _seen: dict = field(default_factory=dict, repr=False)
    _probing: bool = False

    def _record(self, module, args, kwargs, output) -> None:
        hidden = kwargs["hidden_states"]
        layer = int(module.layer_idx)
        if self._probing:  # the replay records its own queries (``replay_probes``)
            return
        if hidden.shape[1] > 1:
            self._seen[("window", layer)] = window_queries(module, hidden, kwargs, self.window)[0].float().cpu().numpy()
            self._seen[("kwargs", layer)] = kwargs

    @contextmanager
    def __call__(self, model: Any):
        """Prefill under the block; after it, replay the probes and compress every layer."""
        self._seen = {}
        hooks = [layer.self_attn.register_forward_hook(self._record, with_kwargs=True)
                 for layer in model.model.layers]
        seen: dict = {}
        original = model.model.forward

        def wrapped(model_self, *args, **kwargs):
            seen.setdefault("cache", kwargs.get("past_key_values"))
            return original(*args, **kwargs)

        model.model.forward = MethodType(wrapped, model.model)
        try:
            try:
                yield
            finally:
                model.model.forward = original
            if self.compression_ratio > 0 and seen.get("cache") is not None:
                self._probe(model, seen["cache"])
                self._compress(model, seen["cache"])
        finally:
            for hook in hooks:
                hook.remove()
            self._seen = {}

    def _probe(self, model: Any, cache: Any) -> None:
        if self.tokenizer is None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(model.config.name_or_path)
        self._probing = True
        try:
            for layer, queries in enumerate(replay_probes(model, self.tokenizer, cache, self.submission.probes)):
                self._seen[("probe", layer)] = queries
        finally:
            self._probing = False

    def _compress(self, model: Any, cache: Any) -> None:
        box = sandbox_for(self.submission, Limits.of(**self.limits))
        n_layers = len(model.model.layers)
        for layer in range(n_layers):
            keys, values = cache.layers[layer].keys, cache.layers[layer].values
            if keys.shape[0] != 1:
                raise SubmissionError("protocol", "a probing press runs one context at a time (batch 1)")
            budget = compute_n_kept(keys.shape[2], self.compression_ratio)
            probes = self._seen.get(("probe", layer), [])
            arrays = {"keys": keys[0].float().cpu().numpy(), "values": values[0].float().cpu().numpy(),
                      "queries": self._seen[("window", layer)],
                      "positions": key_positions(self._seen[("kwargs", layer)], keys.shape[2], 1)[0],
                      **probe_arrays(probes, self._seen[("window", layer)].shape[0], keys.shape[3])}
            answer = box.call_parts(arrays, budget=int(budget), layer=layer, n_layers=n_layers,
                                    compression_ratio=float(self.compression_ratio))
            if self.submission.returns == "scores":
                if set(answer) != {"out"}:
                    raise SubmissionError("bad_output", "score() returned a Rewrite; only keep() may rewrite entries")
                scores = torch.from_numpy(validate_scores(answer["out"], keys.shape[1], keys.shape[2]))
                answer = {"out": scores.topk(budget, dim=-1).indices.numpy()}
            new_k, new_v = apply_keep([answer], keys, values, budget)
            cache.layers[layer].keys, cache.layers[layer].values = new_k, new_v


def replay_probes(model: Any, tokenizer: Any, cache: Any, probes: tuple[str, ...]) -> list[list[np.ndarray]]:
    """Per layer, each probe's queries after RoPE, (H_q, n_i, D) float32: every probe run through the model after
    the context held in ``cache``, on a copy of it (``cache`` itself is never extended). The probe press and the
    rule judge's real layers (``judges.layers``) both call it, so a method gets the same probe queries from both."""
    seen: dict[int, list[np.ndarray]] = {}

    def record(module, args, kwargs, output) -> None:
        hidden = kwargs["hidden_states"]
        q = window_queries(module, hidden, kwargs, hidden.shape[1])[0].float().cpu().numpy()
        seen.setdefault(int(module.layer_idx), []).append(q)

    hooks = [layer.self_attn.register_forward_hook(record, with_kwargs=True) for layer in model.model.layers]
    try:
        with torch.no_grad():
            for ids in probe_ids(tokenizer, probes):
                model.model(input_ids=ids.to(model.device), past_key_values=copy.deepcopy(cache))
    finally:
        for hook in hooks:
            hook.remove()
    return [seen.get(layer, []) for layer in range(len(model.model.layers))]


def probe_arrays(probes: list[np.ndarray], heads: int, dim: int) -> dict[str, np.ndarray]:
    """``probe_queries`` (H_q, P, D), the probes concatenated, and ``probe_lengths`` (n,) for one layer."""
    return {"probe_queries": np.concatenate(probes, axis=1) if probes else np.zeros((heads, 0, dim), np.float32),
            "probe_lengths": np.array([q.shape[1] for q in probes], np.int64)}


def probe_press(sub: Submission, compression_ratio: float, window: int = WINDOW, tokenizer: Any = None,
                **limits: Any) -> SubmissionProbePress:
    """The probing submission as a press (own prefill; see the module doc); limits: see ``sandbox.Limits``."""
    Limits.of(**limits)
    return SubmissionProbePress(submission=sub, compression_ratio=compression_ratio, window=window,
                                limits=dict(limits), tokenizer=tokenizer)
