"""Run an untrusted policy program in the sandbox for untrusted code (``cachecraft_lib.sandbox``).

The trusted side (this module, in the evaluator's process) keeps the model, the data and the answers; it
sends the candidate only feature contexts (arrays and scalars) and checks the returned indices with
``validate_selection`` itself, so the invariants are outside the candidate's reach. The boundary is the
operating system (namespaces, seccomp, a cgroup; fails closed unless ``allow_weak``); the time limit
counts the sandbox's CPU time (out of the candidate's reach), so a verdict does not depend on the
machine's load, with a wall-clock backstop per message and a wall-clock budget for the sandbox's life.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..methods.features import FEATURES
from ..methods.policy import SelectionError, validate_selection
from ..sandbox import Box, Failure, Limits

LAYER_FILES = (Path(__file__).with_name("child.py"),)
ALLOWED_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
SCALARS = ("L", "K", "H", "Q", "layer", "compression_ratio", "chunk_length", "window")
KNOWN_KINDS = {"load", "crash", "memory", "tamper", "file_access", "network", "boundary"}


class CandidateFailed(RuntimeError):
    """The candidate hung, crashed, ran out of memory, tampered with its inputs or broke an invariant."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


@dataclass
class Sandbox:
    """One candidate program in one sandbox; use as a context manager. ``boundary`` names what was in force."""

    source: str
    timeout_s: float = 10.0  # CPU seconds per message (module doc)
    memory_mb: int = 1024
    wall_s: float = 3600.0  # wall seconds for the sandbox's whole life
    allow_weak: bool = False

    def __post_init__(self) -> None:
        self._box = Box(LAYER_FILES, Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                                            load_s=self.timeout_s + 30, wall_s=self.wall_s, allow_weak=self.allow_weak))

    @property
    def boundary(self) -> str:
        return self._box.boundary_name

    def pids(self) -> list[int]:
        """The sandbox's processes (to pause or inspect them from outside)."""
        return self._box.pids()

    def __enter__(self) -> Sandbox:
        try:
            reply = self._box.start({}, self.source)
        except Failure as err:
            raise CandidateFailed(err.kind, err.message) from None
        if not reply.get("ok"):
            self.close()
            raise _failed(reply, "load", "could not load")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._box.close()

    def select_layers(self, contexts: list) -> list[np.ndarray]:
        """Validated, sorted kept indices for each layer context; raises ``CandidateFailed`` otherwise."""
        arrays = {f"{i}/{name}": ctx.features[name] for i, ctx in enumerate(contexts) for name in FEATURES
                  if name in ctx.features}
        header = {"contexts": [{k: _plain(getattr(ctx, k)) for k in SCALARS} for ctx in contexts]}
        try:
            reply = self._box.request(header, arrays)
        except Failure as err:
            raise CandidateFailed(err.kind, err.message) from None
        if not reply.header.get("ok"):
            raise _failed(reply.header, "crash", "failed")
        layers, kept = reply.header.get("layers"), reply.arrays
        if not isinstance(layers, list) or len(layers) != len(contexts):
            raise CandidateFailed("protocol", "a reply without one entry per layer")
        return [_checked(ctx, layer, kept.get(str(i))) for i, (ctx, layer) in enumerate(zip(contexts, layers, strict=True))]


def _plain(value: object) -> int | float:
    return float(value) if isinstance(value, float) else int(value)


def _failed(reply: dict, default_kind: str, default: str) -> CandidateFailed:
    kind, text = reply.get("kind", default_kind), reply.get("error", default)
    if not isinstance(kind, str) or kind not in KNOWN_KINDS or not isinstance(text, str):
        return CandidateFailed("protocol", "a failed reply without a known kind")
    return CandidateFailed(kind, text)


def _checked(ctx: object, layer: object, kept: np.ndarray | None) -> np.ndarray:
    """One layer's kept indices, checked against the invariants (``CandidateFailed('invariant')``)."""
    if not isinstance(layer, dict) or not isinstance(layer.get("dtype"), str):
        raise CandidateFailed("protocol", "a layer entry that is not an object with a dtype")
    if layer.get("scores_shape") != [ctx.L]:
        raise CandidateFailed("invariant", f"invariant 'scores' violated: score_tokens returned shape "
                                           f"{str(layer.get('scores_shape'))[:80]}, expected [{ctx.L}]")
    arr = kept if kept is not None else np.zeros(0, dtype=np.float64)
    if layer["dtype"] not in ALLOWED_DTYPES or arr.dtype.name not in ALLOWED_DTYPES:
        arr = arr.astype(np.float64)  # reported by the validator as an 'integer' violation
    try:
        return validate_selection(arr.copy(), ctx.L, ctx.compression_ratio, ctx.chunk_length)
    except SelectionError as err:
        raise CandidateFailed("invariant", str(err)) from None
