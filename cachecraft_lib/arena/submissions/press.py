"""A submission as a real KVPress press, and trusted KVPress presses on the same path.

``submission_press(sub, ratio)`` is a ``SubmissionScorerPress`` (a KVPress ``ScorerPress``) when the method
defines ``score``, so every KVPress wrapper that takes a scorer takes it (``AdaKVPress``, ``ChunkKVPress``,
``DecodingPress``, ...), or a ``SubmissionKeepPress`` (a ``BasePress`` gathering the kept indices per KV head)
when it defines ``keep``. Per attention layer and batch row the press sends the method, in its sandbox, the
layer's keys and values after RoPE, the last ``window`` queries after RoPE (computed as KVPress's SnapKV
does), the positions and the budget (``method_api``), validates the answer here and applies it. Both
presses work in a live prefill (``with press(model)``) and under the grid's ``SharedPrefill.cache_for``.

Presses of the same submission and limits share one sandboxed child (``sandbox_for``) and one wall-clock budget
per evaluation (``Limits.wall_s``, over all its contexts' sandboxes; ``start_evaluation`` starts a fresh one): an evaluation builds
a press per context and budget, and a child per press would cost more than the method. A failure raises
``SubmissionError`` with its kind and retires the child; ``close_sandboxes`` ends them all (also at exit).
The runners end them before every context (``board_runner.over_contexts``): a method's state (``self``) lives for
one context, so it cannot count contexts or carry what it saw on one context to the next (the dev and test
splits differ in their number of contexts; see arena/README.md). ``BOUNDARIES`` keeps, per code hash, the
boundary the sandbox reported (its ``boundary`` attribute), for the ledger's entry.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from kvpress import BasePress, ScorerPress
from kvpress.utils import compute_n_kept, get_prerope_query_states
from transformers.models.llama.modeling_llama import rotate_half

from ...methods.features import buffer_position_embeddings
from ...sandbox import WallBudget
from .folder import Submission
from .sandbox import REWRITE_SCALE, Limits, MethodSandbox, validate_indices, validate_rewrite, validate_scores

WINDOW = 64
_SANDBOXES: dict[tuple, MethodSandbox] = {}
_BUDGETS: dict[tuple, WallBudget] = {}
BOUNDARIES: dict[str, str] = {}
UNREPORTED = "unreported (a sandbox without a boundary attribute: the in-process audit hook)"


def sandbox_for(sub: Submission, limits: Limits) -> MethodSandbox:
    """The live sandbox of ``sub`` under ``limits``, started on first use."""
    key = (sub.identity, sub.returns, tuple(sorted(vars(limits).items())))
    box = _SANDBOXES.get(key)
    if box is None or not box.alive:
        budget = _BUDGETS.setdefault(key, WallBudget(limits.wall_s))
        box = _SANDBOXES[key] = MethodSandbox(sub, limits, budget=budget).start()
        BOUNDARIES[sub.code_sha256] = str(getattr(box, "boundary", UNREPORTED))
    return box


def start_evaluation() -> None:
    """End every sandbox and start fresh wall-clock budgets: each submission's ``wall_s`` counts from here,
    over every sandbox it gets until the next call (closing sandboxes per context does not reset it)."""
    close_sandboxes()
    _BUDGETS.clear()


@atexit.register
def close_sandboxes() -> None:
    """End every sandboxed child (their state, a method's ``self``, goes with them)."""
    for box in _SANDBOXES.values():
        box.close()
    _SANDBOXES.clear()


def window_queries(module: Any, hidden_states: torch.Tensor, kwargs: dict, window: int) -> torch.Tensor:
    """(B, H_q, W, D) queries of the last ``window`` hidden states after RoPE (as KVPress's SnapKV computes them)."""
    w = min(window, hidden_states.shape[1])
    cos, sin = buffer_position_embeddings(module, hidden_states, kwargs)
    q = get_prerope_query_states(module, hidden_states[:, -w:])
    cos, sin = cos[:, -w:].unsqueeze(1), sin[:, -w:].unsqueeze(1)
    return q * cos + rotate_half(q) * sin


def key_positions(kwargs: dict, n_keys: int, batch: int) -> np.ndarray:
    """(B, L) positions of the cached tokens: the last one at the current position, consecutive before it."""
    if kwargs.get("position_ids") is not None:
        last = kwargs["position_ids"][:, -1].reshape(-1)
    elif kwargs.get("cache_position") is not None:
        last = kwargs["cache_position"][-1:].reshape(1)
    else:
        last = torch.tensor([n_keys - 1])
    last = last.expand(batch) if last.numel() == 1 else last
    return (last.cpu().long()[:, None] - torch.arange(n_keys - 1, -1, -1)[None]).numpy()


@dataclass
class _SandboxedMethod:
    """What both presses share: the submission, its limits and the per-layer call."""

    submission: Submission = None
    compression_ratio: float = 0.0
    window: int = WINDOW
    limits: dict = field(default_factory=dict)
    n_layers: int = 0

    def post_init_from_model(self, model: Any) -> None:
        self.n_layers = int(model.config.num_hidden_layers)

    def _answers(self, module, hidden_states, keys, values, kwargs, budget: int) -> list[dict[str, np.ndarray]]:
        box = sandbox_for(self.submission, Limits.of(**self.limits))
        queries = window_queries(module, hidden_states, kwargs, self.window).float().cpu().numpy()
        positions = key_positions(kwargs, keys.shape[2], keys.shape[0])
        k, v = keys.float().cpu().numpy(), values.float().cpu().numpy()
        layer = int(getattr(module, "layer_idx", 0))
        return [box.call_parts({"keys": k[b], "values": v[b], "queries": queries[b], "positions": positions[b]},
                               budget=int(budget), layer=layer, n_layers=self.n_layers or layer + 1,
                               compression_ratio=float(self.compression_ratio)) for b in range(keys.shape[0])]


@dataclass
class SubmissionScorerPress(_SandboxedMethod, ScorerPress):
    """A submission whose method returns per-token scores, as a KVPress ``ScorerPress``."""

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        budget = compute_n_kept(keys.shape[2], self.compression_ratio)
        answers = self._answers(module, hidden_states, keys, values, kwargs, budget)
        if any(set(a) != {"out"} for a in answers):
            from .folder import SubmissionError

            raise SubmissionError("bad_output", "score() returned a Rewrite; only keep() may rewrite entries")
        rows = [validate_scores(a["out"], keys.shape[1], keys.shape[2]) for a in answers]
        return torch.from_numpy(np.stack(rows)).to(keys.device)


@dataclass
class SubmissionKeepPress(_SandboxedMethod, BasePress):
    """A submission whose method returns the indices to keep: gathers them per KV head (the cache shrinks)."""

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if self.compression_ratio == 0:
            return keys, values
        budget = compute_n_kept(keys.shape[2], self.compression_ratio)
        answers = self._answers(module, hidden_states, keys, values, kwargs, budget)
        return apply_keep(answers, keys, values, budget)


def apply_keep(answers: list[dict[str, np.ndarray]], keys: torch.Tensor, values: torch.Tensor,
               budget: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, H, n, D) keys and values kept by ``keep``'s answers (one per batch row), a ``Rewrite``'s replacements
    written over the kept entries: the cache holds what it would hold without the rewrite, in number and dtype."""
    from .folder import SubmissionError

    rows, rewrites = [], []
    bounds = {"keys": REWRITE_SCALE * float(keys.abs().max()), "values": REWRITE_SCALE * float(values.abs().max())}
    for a in answers:
        validate_indices(a["out"], keys.shape[1], keys.shape[2], budget)
        idx, new = validate_rewrite(a, a["out"], (keys.shape[1], keys.shape[2], keys.shape[3]), keys.dtype, bounds)
        rows.append(idx)
        rewrites.append(new)
    if len({r.shape[1] for r in rows}) > 1:
        raise SubmissionError("bad_output", f"keep() kept {[r.shape[1] for r in rows]} entries in the batch's "
                                            "rows; keep the same number in every row (e.g. the budget)")
    idx = torch.from_numpy(np.stack(rows)).to(keys.device)[..., None].expand(-1, -1, -1, keys.shape[-1])
    kept_k, kept_v = keys.gather(2, idx).contiguous(), values.gather(2, idx).contiguous()
    for b, new in enumerate(rewrites):
        if "keys" in new:
            kept_k[b] = torch.from_numpy(new["keys"]).to(device=keys.device, dtype=keys.dtype)
        if "values" in new:
            kept_v[b] = torch.from_numpy(new["values"]).to(device=values.device, dtype=values.dtype)
    return kept_k, kept_v


def submission_press(sub: Submission, compression_ratio: float, window: int = WINDOW, **limits: Any) -> BasePress:
    """The submission as a KVPress press at ``compression_ratio`` (fraction evicted); limits: see ``sandbox.Limits``."""
    Limits.of(**limits)  # unknown limits fail here, not at the first layer
    cls = SubmissionScorerPress if sub.returns == "scores" else SubmissionKeepPress
    press = cls(submission=sub, compression_ratio=compression_ratio, window=window, limits=dict(limits))
    if getattr(sub, "allocation", "uniform") == "head_adaptive":  # Ada-KV over the method's validated scores
        from kvpress import AdaKVPress

        return AdaKVPress(press)
    return press


@dataclass
class TrustedPress(BasePress):
    """A trusted KVPress press on the arena's path: no sandbox, the same hooks, ratio and masks as ``press``."""

    press: BasePress = None

    def __post_init__(self) -> None:
        if not isinstance(self.press, BasePress):
            raise TypeError(f"trusted_press needs a KVPress press, got {type(self.press).__name__}")

    @property
    def compression_ratio(self) -> float:
        return self.press.compression_ratio

    @compression_ratio.setter
    def compression_ratio(self, value: float) -> None:
        self.press.compression_ratio = value

    def post_init_from_model(self, model: Any) -> None:
        self.press.post_init_from_model(model)

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        return self.press.compress(module, hidden_states, keys, values, attentions, kwargs)


def trusted_press(press: BasePress) -> BasePress:
    """A trusted KVPress baseline through the arena's adapter (no sandbox)."""
    return TrustedPress(press)
