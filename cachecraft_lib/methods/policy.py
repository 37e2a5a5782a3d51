"""The policy interface: what an eviction policy program defines, and the invariants its output must meet.

A policy program is Python source that defines

    score_tokens(ctx) -> array of L scores
    select_tokens_to_keep(scores, ctx) -> integer indices of the tokens to keep

over a ``FeatureContext`` (17 token arrays + 5 scalars, see ``cachecraft_lib.methods.features``). The
selection is validated outside the program (``validate_selection``): a violation raises
``SelectionError`` naming the invariant and the offending values; nothing is truncated or repaired.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from ..sandbox.runtime.policy_api import maxabs  # noqa: F401  (one numpy maxabs, also the sandbox's)
from . import frc


class Policy(Protocol):
    def score_tokens(self, ctx: Any) -> Any: ...

    def select_tokens_to_keep(self, scores: Any, ctx: Any) -> Any: ...


class SelectionError(ValueError):
    """A policy's selection broke an invariant: ``invariant`` names it, ``offending`` shows the values."""

    def __init__(self, invariant: str, message: str, offending: Any = None) -> None:
        self.invariant, self.offending = invariant, offending
        shown = "" if offending is None else f" (offending: {_preview(offending)})"
        super().__init__(f"invariant '{invariant}' violated: {message}{shown}")


class PolicyLoadError(ValueError):
    """A policy program could not be loaded: syntax error, missing function, or it raised on import."""


def _preview(values: Any, limit: int = 10) -> str:
    items = list(np.asarray(values).reshape(-1)[: limit + 1]) if not isinstance(values, str) else [values]
    text = ", ".join(str(v) for v in items[:limit])
    return f"[{text}{', ...' if len(items) > limit else ''}]"


# ---------------------------------------------------------------------------------------- helpers
def topk_tokens(scores: Any, ctx: Any) -> np.ndarray:
    """Tokenwise selection: the sorted indices of the ``ctx.K`` highest scores."""
    t = torch.from_numpy(np.array(scores, dtype=np.float32))  # a copy: feature arrays are read-only
    return frc.token_top_k(t, ctx.compression_ratio).numpy()


def topk_chunks(scores: Any, ctx: Any, chunk_length: int | None = None) -> np.ndarray:
    """Chunked selection: whole chunks of ``ctx.chunk_length`` tokens with the best mean score, sorted."""
    t = torch.from_numpy(np.array(scores, dtype=np.float32))  # a copy: feature arrays are read-only
    return frc.chunk_top_k(t, ctx.compression_ratio, chunk_length or ctx.chunk_length).numpy()


# ------------------------------------------------------------------------------------- validation
def validate_selection(indices: Any, length: int, compression_ratio: float, chunk_length: int = 20) -> np.ndarray:
    """Check a selection and return it sorted (int64). Raises ``SelectionError`` on any violation.

    Invariants: integer dtype; one dimension; every index within [0, L); no duplicates; and size:
    exactly K = max(1, floor(L*(1-r))) tokens (tokenwise) or the union of exactly
    n_keep = max(1, floor(ceil(L/Lc)*(1-r))) whole chunks (chunked, the paper's rule).
    """
    if isinstance(indices, torch.Tensor):
        indices = indices.detach().cpu().numpy()
    arr = np.asarray(indices)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise SelectionError("integer", f"indices must be integers, got dtype {arr.dtype}", arr)
    if arr.ndim != 1:
        raise SelectionError("shape", f"indices must be one-dimensional, got shape {arr.shape}")
    out_of_range = arr[(arr < 0) | (arr >= length)]
    if out_of_range.size:
        raise SelectionError("range", f"{out_of_range.size} indices outside [0, {length})", out_of_range)
    uniq, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        raise SelectionError("unique", f"{int((counts > 1).sum())} indices repeated", uniq[counts > 1])
    k = frc.n_kept_tokens(length, compression_ratio)
    if arr.size == k:
        return uniq.astype(np.int64)
    n_chunks, n_keep = frc.n_kept_chunks(length, compression_ratio, chunk_length)
    chunks = np.unique(uniq // chunk_length)
    chunk_sizes = np.minimum(chunk_length, length - chunks * chunk_length)
    whole = arr.size == chunk_sizes.sum()
    if whole and chunks.size == n_keep:
        return uniq.astype(np.int64)
    if whole:
        raise SelectionError("size", f"kept {chunks.size} whole chunks, the rule keeps n_keep = {n_keep} of "
                                     f"{n_chunks} (or exactly K = {k} tokens tokenwise)", chunks)
    partial = [int(c) for c, n in zip(chunks, chunk_sizes, strict=True) if (uniq // chunk_length == c).sum() != n]
    raise SelectionError("size", f"kept {arr.size} tokens: tokenwise needs exactly K = {k}, chunked needs "
                                 f"{n_keep} whole chunks of {chunk_length}; partial chunks", partial or arr.size)


# ---------------------------------------------------------------------------------------- loading
def load_policy(program: str | Path, name: str = "policy_program") -> types.ModuleType:
    """Load a policy program from a file path or from source text, as a fresh module.

    This runs the program in-process: use it for trusted programs (the seeds, FRC). Candidates of
    the search are untrusted and run isolated (``cachecraft_lib.search``).
    """
    path = Path(program) if isinstance(program, Path) or (isinstance(program, str) and "\n" not in program
                                                            and program.endswith(".py")) else None
    if path is not None and not path.is_file():
        raise PolicyLoadError(f"policy program {path} does not exist")
    source = path.read_text() if path is not None else str(program)
    module = types.ModuleType(name)
    module.__file__ = str(path) if path else f"<{name}>"
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except SyntaxError as err:
        raise PolicyLoadError(f"policy program {module.__file__} has a syntax error at line {err.lineno}: "
                              f"{err.msg}") from err
    except Exception as err:
        raise PolicyLoadError(f"policy program {module.__file__} raised while loading: "
                              f"{type(err).__name__}: {err}") from err
    missing = [f for f in ("score_tokens", "select_tokens_to_keep") if not callable(getattr(module, f, None))]
    if missing:
        raise PolicyLoadError(f"policy program {module.__file__} does not define {', '.join(missing)}; a policy "
                              f"defines score_tokens(ctx) and select_tokens_to_keep(scores, ctx)")
    return module


def run_policy(policy: Policy, ctx: Any) -> np.ndarray:
    """Score, select and validate: the kept indices for one layer, sorted."""
    scores = np.asarray(policy.score_tokens(ctx))
    if scores.shape != (ctx.L,):
        raise SelectionError("scores", f"score_tokens must return {ctx.L} scores, got shape {scores.shape}")
    return validate_selection(policy.select_tokens_to_keep(scores, ctx), ctx.L, ctx.compression_ratio,
                              ctx.chunk_length)


# Policy programs (the search's seeds, every evolved program, the shipped ones) import their helpers as
# ``cachecraft_lib.policy``: that is the program format's name for this module, kept so that programs' text (and
# with it the search's trajectory) stays as it was. Programs loaded in this process resolve it to this module; the
# sandbox's child layer registers its numpy copy (``sandbox/runtime/policy_api.py``) under the same name.
PROGRAM_MODULE = "cachecraft_lib.policy"
sys.modules.setdefault(PROGRAM_MODULE, sys.modules[__name__])
