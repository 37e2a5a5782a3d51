"""What every converted policy program of a population shares on one context, computed once outside the sandbox.

A search candidate becomes an arena submission (``arena.submissions.from_program``): its ``method.py`` rebuilds
CacheCraft's 17 features in numpy from each layer's keys, values and window queries, then runs the program's
``score_tokens``/``select_tokens_to_keep``. The features depend on the context, the layer and the budget,
never on the program, so the population path builds them here once per (context, layer) with the very
functions the converted file defines (``METHOD_PREAMBLE`` executed in this process: same code, same numpy,
same inputs, hence the same bits), keeps them across generations, and sends them to each candidate's sandbox,
where ``Method.keep_features`` runs only the program, for every budget of the layer in one call. A feature
that differs between budgets (``head_consistency``: the heads' top-``budget`` agreement) is sent once per
budget, the others once.

The indices that come back are validated here (``validate_indices``) and applied by ``KeptIndicesPress``, the
arena's keep press with the validated answers in place of the sandbox call. The compression FLOPs a row
records are the arena press's: its window queries, counted once per context (``context_features``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from kvpress import BasePress
from kvpress.utils import compute_n_kept

from ..arena.board_runner import count_flops
from ..arena.submissions.press import WINDOW, SubmissionKeepPress, key_positions, window_queries
from ..arena.submissions.sandbox import validate_indices, validate_rewrite
from ..grid.decode import CacheRow


@functools.lru_cache(maxsize=1)
def converted_helpers() -> dict[str, Any]:
    """The namespace of the converted ``method.py``'s preamble (trusted: it is this project's own text)."""
    from ..arena.submissions.from_program import METHOD_PREAMBLE

    namespace: dict[str, Any] = {"__name__": "converted_preamble"}
    exec(compile(METHOD_PREAMBLE.format(origin="(features built outside the sandbox)"), "preamble.py", "exec"),
         namespace)
    return namespace


# What the preamble's feature code reads when it runs (each bound once by the preamble itself)
FEATURE_NAMES = ("np", "math", "N_SINK", "_chunk_means", "_features", "_tail_attention")
INTROSPECTION = {"globals", "vars", "setattr", "delattr", "exec", "eval", "__import__", "__builtins__", "sys",
                 "__dict__"}


SAME_MODULE = {("np", "numpy"), ("math", "math")}


def shares_features(method_source: str) -> bool:
    """Whether a converted ``method.py`` builds its features with the preamble's code unchanged: the names that
    code reads are bound exactly as often as the preamble binds them, no attribute is written on an imported
    module, no introspection. A program that fails this (only hand- or LLM-written ones could) would see other
    features in its own sandbox than the ones built here, so ``BoardFitness`` evaluates it one at a time through
    the arena's path instead."""
    from ..arena.submissions.from_program import METHOD_PREAMBLE

    mine = _bindings(ast.parse(method_source))
    return mine is not None and mine == _bindings(ast.parse(METHOD_PREAMBLE.format(origin="")))


def _bindings(tree: ast.AST) -> dict[str, int] | None:
    """How often each of ``FEATURE_NAMES`` is bound in ``tree`` (None: introspection or a module attribute
    written, which could change the feature code without binding a name)."""
    modules = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names}
    bound = {name: 0 for name in FEATURE_NAMES}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Name):
            if node.id in INTROSPECTION:
                return None
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.Import):  # importing numpy as np or math again binds the same module
            names += [a.asname or a.name.split(".")[0] for a in node.names
                      if (a.asname or a.name, a.name) not in SAME_MODULE]
        elif isinstance(node, ast.ImportFrom):
            names += [a.asname or a.name for a in node.names]
        elif isinstance(node, ast.Global):
            names += node.names
        elif isinstance(node, ast.Attribute):
            base = node
            while isinstance(base, ast.Attribute):
                base = base.value
            on_module = isinstance(base, ast.Name) and base.id in modules
            if (node.attr in INTROSPECTION and (on_module or node.attr != "__dict__")) or \
                    (on_module and isinstance(node.ctx, (ast.Store, ast.Del))):
                return None
        for name in names:
            if name in bound:
                bound[name] += 1
    return bound


@dataclass
class LayerFeatures:
    """One layer's request to a candidate: its features (``f.<name>`` / ``f.<name>.<j>``) and scalars."""

    layer: int
    n_tokens: int
    heads: int
    queries: int
    budgets: tuple[int, ...]
    ratios: tuple[float, ...]
    names: tuple[str, ...]
    arrays: dict[str, np.ndarray] = field(repr=False)

    def header(self) -> dict[str, Any]:
        return {"budgets": list(self.budgets), "ratios": list(self.ratios), "features": list(self.names),
                "n_tokens": self.n_tokens, "heads": self.heads, "queries": self.queries, "layer": self.layer}


class _Inputs(BasePress):
    """Records, per layer, what the arena's sandboxed press sends its method (``press._SandboxedMethod``)."""

    def __init__(self, window: int) -> None:
        self.window, self.layers = window, []

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        queries = window_queries(module, hidden_states, kwargs, self.window).float().cpu().numpy()
        positions = key_positions(kwargs, keys.shape[2], keys.shape[0])
        self.layers.append((int(getattr(module, "layer_idx", 0)), keys.float().cpu().numpy()[0],
                            values.float().cpu().numpy()[0], queries[0], positions[0]))
        return keys, values


def context_features(shared: Any, ratios: tuple[float, ...], window: int = WINDOW) -> tuple[list[LayerFeatures], int]:
    """Every layer's features of a shared prefill (``models.prefill.SharedPrefill``) for the board's ratios, and
    the FLOPs the arena's sandboxed press spends in this process on that context (its window queries: the same
    for every budget and candidate; gathering the kept entries counts none), charged to every candidate's row."""
    helpers = converted_helpers()
    inputs = _Inputs(window)
    with count_flops() as counter:
        shared.cache_for(inputs)
    flops = int(counter.get_total_flops())
    out = []
    for layer, k, v, q, _ in inputs.layers:
        keys, values = k.astype(np.float32), v.astype(np.float32)  # what Method.keep does with its layer
        attn = helpers["_tail_attention"](q.astype(np.float32), keys)
        budgets = tuple(compute_n_kept(keys.shape[1], r) for r in ratios)
        per_budget = [helpers["_features"](attn, keys, values, b) for b in budgets]
        names = tuple(per_budget[0])
        arrays = {}
        for name in names:
            if all(np.array_equal(f[name], per_budget[0][name]) for f in per_budget[1:]):
                arrays[f"f.{name}"] = per_budget[0][name]
            else:
                arrays.update({f"f.{name}.{j}": f[name] for j, f in enumerate(per_budget)})
        out.append(LayerFeatures(layer, keys.shape[1], attn.shape[0], attn.shape[1], budgets, tuple(ratios),
                                 names, arrays))
    return out, flops


def selection_digest(kept: dict[int, np.ndarray]) -> str:
    """A digest of one budget's validated indices over all layers: equal digests, equal compressed caches."""
    h = hashlib.blake2b(digest_size=16)
    for layer in sorted(kept):
        h.update(f"{layer}:{kept[layer].shape}".encode())
        h.update(np.ascontiguousarray(kept[layer], dtype=np.int64).tobytes())
    return h.hexdigest()


@dataclass
class KeptIndicesPress(SubmissionKeepPress):
    """The arena's keep press with the candidate's validated indices per layer (``answers``) in place of the
    sandbox call (``compress`` validates them again and gathers them, as for any keep answer)."""

    answers: dict = field(default_factory=dict)

    def _answers(self, module, hidden_states, keys, values, kwargs, budget: int) -> list[dict[str, np.ndarray]]:
        return [{"out": self.answers[int(getattr(module, "layer_idx", 0))]}]

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        """``apply_keep`` for an answer without a ``Rewrite``: the same validation, sort and gather, without the
        rewrite bounds (two passes over the layer's keys and values that a keep-only answer never reads)."""
        if self.compression_ratio == 0:
            return keys, values
        budget = compute_n_kept(keys.shape[2], self.compression_ratio)
        (answer,) = self._answers(module, hidden_states, keys, values, kwargs, budget)
        validate_indices(answer["out"], keys.shape[1], keys.shape[2], budget)
        idx, _ = validate_rewrite({}, answer["out"], (keys.shape[1], keys.shape[2], keys.shape[3]))
        index = torch.from_numpy(idx[None]).to(keys.device)[..., None].expand(-1, -1, -1, keys.shape[-1])
        return keys.gather(2, index).contiguous(), values.gather(2, index).contiguous()


def kept_cache_row(shared: Any, answers: dict, ratio: float, question_ids: torch.Tensor, start: int,
                   max_new_tokens: int) -> CacheRow:
    """The decode row of ``shared.cache_for(KeptIndicesPress(answers=answers, compression_ratio=ratio))``, built
    straight from the prefill's keys and values: the same validation, sort and gather per layer, without the
    DynamicCache (its update copies every gathered layer once more) or the press's hooks. Why: on the population
    path building the caches was a quarter of the parent's time; the tensors are equal element for element
    (tests and ``bench_search.check_fast_path`` compare the two)."""
    keys_out, values_out = [], []
    with torch.no_grad():
        for module, _, keys, values, _ in shared.layers:
            module.masked_key_indices = None  # as ``SharedPrefill._ready``: no head mask on a keep press's cache
            if ratio == 0:
                keys_out.append(keys.contiguous())
                values_out.append(values.contiguous())
                continue
            budget = compute_n_kept(keys.shape[2], ratio)
            answer = answers[int(getattr(module, "layer_idx", 0))]
            validate_indices(answer, keys.shape[1], keys.shape[2], budget)
            idx, _ = validate_rewrite({}, answer, (keys.shape[1], keys.shape[2], keys.shape[3]))
            index = torch.from_numpy(idx[None]).to(keys.device)[..., None].expand(-1, -1, -1, keys.shape[-1])
            keys_out.append(keys.gather(2, index).contiguous())
            values_out.append(values.gather(2, index).contiguous())
    return CacheRow(keys_out, values_out, [None] * len(keys_out), question_ids.reshape(1, -1), int(start),
                    int(max_new_tokens))
