"""A submission's method in the sandbox for untrusted code (``cachecraft_lib.sandbox``), one per evaluation.

One ``MethodSandbox`` serves a whole evaluation (every layer, context and budget): starting a process per
layer would cost more than the compression. The boundary is the operating system (``sandbox.boundary``:
namespaces, seccomp, a cgroup; it fails closed unless weakening is allowed: ``cachecraft doctor``), and
``boundary`` names what was in force, for the ledger). The limits: CPU seconds per layer call, memory of the whole sandbox,
seconds to load, and wall-clock seconds for the whole evaluation (``wall_s``). What comes back is plain
bytes with a JSON header, validated here (``validate_scores`` / ``validate_indices``); every failure is a
``SubmissionError`` with its kind (``protocol`` for a malformed reply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...sandbox import Box, Failure, Limits, WallBudget, clean_text  # Limits: the sandbox's one set of limits
from .folder import Submission, SubmissionError
from .method_api import SCALARS

LAYER_FILES = (Path(__file__).with_name("child.py"), Path(__file__).with_name("method_api.py"))
FLOAT_DTYPES = {"float16", "float32", "float64"}
INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
NUMBER_DTYPES = FLOAT_DTYPES | INT_DTYPES | {"bool"}
KIND_OF_FAILURE = {"process": "file_access", "boundary": "crash"}  # the box's kinds in the arena's terms
KNOWN_KINDS = {"crash", "memory", "tampering", "bad_output", "file_access", "network", "boundary"}  # from the child


def _refusal(err: Failure, layer: int | None = None) -> SubmissionError:
    where = f"layer {layer}: " if layer is not None else ""
    return SubmissionError(KIND_OF_FAILURE.get(err.kind, err.kind), where + err.message)


@dataclass
class MethodSandbox:
    """One submission's ``Method`` in one sandbox; ``call`` runs it on one layer."""

    submission: Submission
    limits: Limits = field(default_factory=Limits)
    calls: int = 0
    budget: WallBudget | None = None  # the evaluation's wall budget, shared by its sandboxes (press.sandbox_for)

    def __post_init__(self) -> None:
        self._box = Box(LAYER_FILES, self.limits, self.budget)  # BoundaryUnavailable here: nothing runs

    @property
    def boundary(self) -> str:
        """The boundary in force (``sandbox.boundary``: e.g. ``"bwrap+seccomp+cgroup"``, or ``"weak: ..."``; record it)."""
        return self._box.boundary_name

    @property
    def cpu_s(self) -> float:
        return self._box.cpu_used

    @property
    def alive(self) -> bool:
        return self._box.alive

    def start(self) -> MethodSandbox:
        self.launch()
        return self.loaded()

    def launch(self) -> MethodSandbox:
        """Start the sandbox and send it the method without waiting for it to load (``loaded`` waits): several
        candidates' sandboxes load side by side (the search's population path)."""
        try:
            from .params import frame_arrays

            params = self.submission.params_arrays
            self._box.launch({"returns": self.submission.returns, "params": bool(params)}, self.submission.source,
                             frame_arrays(params))
        except Failure as err:
            raise _refusal(err) from None
        return self

    def loaded(self) -> MethodSandbox:
        """Wait for the method ``launch`` sent to load; the refusal if it did not."""
        try:
            header = self._box.loaded()
        except Failure as err:
            raise _refusal(err) from None
        if not header.get("ok"):
            self.close()
            raise _reply_refusal(header, "the method did not load")
        return self

    def close(self) -> None:
        self._box.close()

    def __enter__(self) -> MethodSandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, arrays: dict[str, np.ndarray], hook: str | None = None, **scalars: Any) -> np.ndarray:
        """The method's raw answer for one layer (validate it with ``validate_scores``/``validate_indices``);
        ``hook`` names the method called (default: the submission's ``score``/``keep``; ``decode`` on board C).
        A ``Rewrite`` is refused here: only ``call_parts`` (the keep press) accepts one."""
        parts = self.call_parts(arrays, hook, **scalars)
        if set(parts) != {"out"}:
            raise SubmissionError("bad_output", f"layer {scalars['layer']}: {hook or 'score'}() returned a Rewrite; "
                                                "only keep() may rewrite the entries it keeps")
        return parts["out"]

    def call_parts(self, arrays: dict[str, np.ndarray], hook: str | None = None, **scalars: Any) -> dict:
        """The method's raw answer as arrays: ``out`` (scores or indices), and ``keys``/``values`` of a
        ``Rewrite`` (validate them with ``validate_rewrite``)."""
        if not self.alive:
            self.start()
        missing = set(SCALARS) - set(scalars)
        if missing:
            raise TypeError(f"call needs {sorted(missing)}")
        header = {"hook": hook, **{k: scalars[k] for k in SCALARS}}
        try:
            reply = self._box.request(header, arrays)
        except Failure as err:
            raise _refusal(err, scalars["layer"]) from None
        self.calls += 1
        out = reply.arrays
        if not reply.header.get("ok") or "out" not in out:
            self.close()  # a failed method is not trusted with another call
            raise _reply_refusal(reply.header, "failed", scalars["layer"])
        extra = set(out) - {"out", "keys", "values"}
        if extra:
            self.close()
            raise SubmissionError("protocol", f"layer {scalars['layer']}: a reply with arrays {sorted(extra)[:5]}")
        return {k: v.copy() for k, v in out.items()}

    def answer(self, arrays: dict[str, np.ndarray], **scalars: Any) -> np.ndarray:
        """The validated answer for one layer: (H_kv, L) scores or (H_kv, n) sorted indices."""
        out = self.call(arrays, **scalars)
        heads, tokens = arrays["keys"].shape[:2]
        if self.submission.returns == "scores":
            return validate_scores(out, heads, tokens)
        return validate_indices(out, heads, tokens, int(scalars["budget"]))

    def decode(self, arrays: dict[str, np.ndarray], **scalars: Any) -> np.ndarray:
        """The validated ``decode`` answer for one layer: (H_kv, n) sorted indices to keep, n <= budget.

        Float answers are scores (the ``budget`` highest per head are kept; ties keep the earlier entry);
        integer answers are the indices themselves."""
        out = self.call(arrays, hook="decode", **scalars)
        heads, tokens = arrays["keys"].shape[:2]
        budget = int(scalars["budget"])
        if out.dtype.name in FLOAT_DTYPES:
            scores = validate_scores(out, heads, tokens)
            return np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :budget], axis=1)
        return validate_indices(out, heads, tokens, budget)

    def call_whole(self, arrays: dict[str, np.ndarray], **scalars: Any) -> dict[str, np.ndarray]:
        """``whole_cache``'s raw answers (``out.<layer>``) for every layer in one call (``arena.submissions.whole_cache``);
        its CPU limit is the per-layer limit times the layers, within the same wall budget and memory."""
        if not self.alive:
            self.start()
        header = {"hook": "whole_cache", **{k: scalars[k] for k in SCALARS}}
        try:
            reply = self._box.request(header, arrays, cpu_s=self.limits.timeout_s * int(scalars["n_layers"]))
        except Failure as err:
            raise _refusal(err) from None
        self.calls += 1
        if not reply.header.get("ok"):
            self.close()
            raise _reply_refusal(reply.header, "whole_cache failed")
        return {k: a.copy() for k, a in reply.arrays.items()}


    def request(self, hook: str, arrays: dict[str, np.ndarray], cpu_s: float | None = None, **header: Any) -> dict:
        """Another hook of the child layer (``keep_context``: the search's population path) with
        its raw answer arrays; the same failures as ``call_parts`` (validate the answers outside)."""
        if not self.alive:
            self.start()
        try:
            reply = self._box.request({"hook": hook, **header}, arrays, cpu_s=cpu_s)
        except Failure as err:
            raise _refusal(err, header.get("layer")) from None
        self.calls += 1
        if not reply.header.get("ok"):
            self.close()
            raise _reply_refusal(reply.header, f"{hook} failed", header.get("layer"))
        return {k: a.copy() for k, a in reply.arrays.items()}


def _reply_refusal(reply: dict, default: str, layer: int | None = None) -> SubmissionError:
    """The refusal a failed reply names; a kind the arena does not know is itself a protocol error."""
    kind, text = reply.get("kind"), reply.get("error", default)
    if not isinstance(kind, str) or kind not in KNOWN_KINDS or not isinstance(text, str):
        kind, text = "protocol", f"a failed reply without a known kind ({clean_text(kind, 60)})"
    return _refusal(Failure(KIND_OF_FAILURE.get(kind, kind), text), layer)


def validate_scores(out: np.ndarray, n_heads: int, n_tokens: int) -> np.ndarray:
    """(H_kv, L) float32 finite scores from an (L,) or (H_kv, L) answer."""
    if out.dtype.name not in NUMBER_DTYPES:
        raise SubmissionError("bad_output", f"score() returned {out.dtype}, not numbers")
    if out.shape == (n_tokens,):
        out = np.broadcast_to(out, (n_heads, n_tokens))
    if out.shape != (n_heads, n_tokens):
        raise SubmissionError("bad_output", f"score() returned shape {out.shape}; expected ({n_tokens},) or "
                                            f"({n_heads}, {n_tokens})")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = out.astype(np.float32)
    if not np.isfinite(scores).all():
        raise SubmissionError("bad_output", f"score() returned {int((~np.isfinite(scores)).sum())} non-finite "
                                            "scores (NaN or inf, also after conversion to float32)")
    return np.ascontiguousarray(scores)


def validate_indices(out: np.ndarray, n_heads: int, n_tokens: int, budget: int) -> np.ndarray:
    """(H_kv, n) sorted int64 indices, unique per head, in range, 1 <= n <= budget."""
    if out.dtype.name not in INT_DTYPES:
        raise SubmissionError("bad_output", f"keep() returned {out.dtype} values; indices must be integers")
    if out.ndim == 1:
        out = np.broadcast_to(out, (n_heads, out.shape[0]))
    if out.ndim != 2 or out.shape[0] != n_heads:
        raise SubmissionError("bad_output", f"keep() returned shape {out.shape}; expected (n,) or ({n_heads}, n)")
    n = out.shape[1]
    if n > budget:
        raise SubmissionError("over_budget", f"keep() kept {n} entries per head; the budget is {budget}")
    if n == 0:
        raise SubmissionError("bad_output", "keep() kept nothing; keep at least one entry per head")
    idx = out.astype(np.int64)
    bad = idx[(idx < 0) | (idx >= n_tokens)]
    if bad.size:
        raise SubmissionError("out_of_range", f"keep() returned indices outside [0, {n_tokens}): "
                                              f"{sorted(set(bad.tolist()))[:10]}")
    idx = np.sort(idx, axis=1)
    dup = (idx[:, 1:] == idx[:, :-1])
    if dup.any():
        raise SubmissionError("duplicate_indices", f"keep() returned duplicate indices "
                                                   f"{sorted(set(idx[:, 1:][dup].tolist()))[:10]}")
    return np.ascontiguousarray(idx)


REWRITE_SCALE = 16.0  # a replacement may be at most this many times the layer's largest original magnitude


def validate_rewrite(parts: dict[str, np.ndarray], indices: np.ndarray, shape: tuple[int, int, int],
                     cache_dtype: Any = None, bounds: dict[str, float] | None = None
                     ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The kept indices sorted per head with a ``Rewrite``'s ``keys``/``values`` in the same order.

    ``indices`` is the raw (H_kv, n) answer (already checked by ``validate_indices``); each replacement must be
    exactly (H_kv, n, D) float32 (the dtype the method was given: no broadcasting, no silent casts), finite, and
    finite once cast to ``cache_dtype`` (a torch dtype; float16 overflows at 65504), and within ``bounds[part]``
    in magnitude (``REWRITE_SCALE`` x the layer's largest original: a finite 1e30 key still overflows attention)."""
    heads, _, dim = shape
    raw = np.broadcast_to(indices, (heads, indices.shape[-1])) if indices.ndim == 1 else indices
    order = np.argsort(raw.astype(np.int64), axis=1, kind="stable")
    sorted_idx = np.take_along_axis(raw.astype(np.int64), order, axis=1)
    n = sorted_idx.shape[1]
    out = {}
    for part in ("keys", "values"):
        if part not in parts:
            continue
        new = parts[part]
        if new.dtype != np.float32 or new.shape != (heads, n, dim):
            raise SubmissionError("bad_output", f"Rewrite.{part} is {new.dtype} {new.shape}; it must be float32 "
                                                f"({heads}, {n}, {dim}): one row per kept entry")
        if not np.isfinite(new).all():
            raise SubmissionError("bad_output", f"Rewrite.{part} has {int((~np.isfinite(new)).sum())} non-finite "
                                                "values (NaN or inf)")
        limit = (bounds or {}).get(part)
        if limit is not None and float(np.abs(new).max(initial=0.0)) > limit:
            raise SubmissionError("bad_output", f"Rewrite.{part} reaches {float(np.abs(new).max()):.3g}; at most "
                                                f"{limit:.3g} ({REWRITE_SCALE:g} x the layer's largest {part[:-1]})")
        if cache_dtype is not None:
            import torch

            if not torch.isfinite(torch.from_numpy(new).to(cache_dtype)).all():
                raise SubmissionError("bad_output", f"Rewrite.{part} overflows the cache's {cache_dtype}")
        out[part] = np.ascontiguousarray(np.take_along_axis(new, order[..., None], axis=1))
    return np.ascontiguousarray(sorted_idx), out
