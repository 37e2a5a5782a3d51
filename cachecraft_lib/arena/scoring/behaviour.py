"""A digest of what a program *does* on fixed public inputs: ``program_behaviour`` (``plan_looks`` counts looks by it).

Why: ``code_shape``'s digests see the code's form, and a red team (2026-12-05) re-entered one program under forms
that keep what it does (a dead ``pass``, ``x + 0``, a helper inlined, a loop unrolled, a name reached through
``getattr``): each a new shape, so each a fresh look at the test items. ``behaviour_digest`` is the SHA-256 of
the tokens the program keeps, run in the arena's sandbox exactly as the board runs it (a fresh sandbox per
context; per budget, every layer in order; the same arrays the press sends) on ``ProbeInputs``: the first
context of each task of the board's **dev** split (public, the same every time; never a test item), at every
budget of the board. Per layer it hashes the kept indices per KV head: a ``score`` answer's ``budget`` highest
per head (ties: the earlier token; over all heads at once when the entry's allocation is head-adaptive), a
``keep`` answer's indices, and a ``Rewrite``'s contents byte for byte. Ranks, not scores, so ``2 * s`` or
``s + 1`` is the same behaviour, and float noise moves a digest only where it swaps two tokens at the budget's
edge. The trade-off: two different programs keeping the same tokens on every layer, budget and context of those
few dev contexts share a digest (one look); more contexts would make that rarer at the cost of more sandbox
calls per submission.

A program that fails on these inputs gets ``FAILED`` and one whose two runs differ gets ``UNSTABLE`` (the
sandbox does not load ``numpy.random``, but a string's ``hash`` and an object's address differ per process):
each one digest shared by every such program, so neither failing nor randomness buys a fresh digest, and an
honest program (which runs, the same every time) never shares it. Left open: a program that recognises these
public inputs and behaves otherwise on them only, or keys on the date (``numpy.datetime64('now')``); a probe,
whole-cache or decode-time hook (no digest: ``None``, as when the harness itself fails).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

DIGEST_RUNS = 2  # runs compared: a program whose runs differ is UNSTABLE
KEEP_BYTES = 256 << 20  # the dev inputs kept between submissions up to this size (``ProbeInputs``)
FAILED = hashlib.sha256(b"behaviour:failed on the public inputs").hexdigest()
UNSTABLE = hashlib.sha256(b"behaviour:differs between runs on the same inputs").hexdigest()


@dataclass(frozen=True)
class LayerInput:
    """One layer of one context as the press sends it to the sandbox (``submissions.press._answers``)."""

    keys: np.ndarray  # (H_kv, L, D) float32
    values: np.ndarray
    queries: np.ndarray  # (H_q, W, D) float32
    positions: np.ndarray  # (L,) int64
    layer: int
    n_layers: int


def probe_items(items: Any) -> Any:
    """The dev items the digest runs on: the first context of each task (items in their split's order)."""
    firsts = items.drop_duplicates("task", keep="first").context_id
    return items[items.context_id.isin(set(firsts))]


class ProbeInputs:
    """The digest's inputs for one board and model (``probe_items`` of ``items``): per context, its layers' inputs
    from one shared prefill (``runner``: a ``BoardRunner``, for its model and tokenisation), as the sandboxed
    press computes them. Computed a context at a time and kept for the next submission when they fit in
    ``KEEP_BYTES`` (the cpu boards': about 10 MB); a larger model's are computed again each time."""

    def __init__(self, runner: Any, items: Any) -> None:
        self.runner, self.items, self.kept_inputs = runner, probe_items(items), None

    def __iter__(self) -> Iterator[list[LayerInput]]:
        if self.kept_inputs is not None:
            yield from self.kept_inputs
            return
        found, size = [], 0
        for _, group in self.items.groupby("context_id", sort=False):
            layers = self._layers(group)
            size += sum(x.keys.nbytes + x.values.nbytes + x.queries.nbytes for x in layers)
            found = found if found is not None and size <= KEEP_BYTES else None
            if found is not None:
                found.append(layers)
            yield layers
        self.kept_inputs = found

    def _layers(self, group: Any) -> list[LayerInput]:
        import torch

        from ...models.prefill import SharedPrefill
        from ..submissions.press import WINDOW, key_positions, window_queries

        model = self.runner.model
        shared = SharedPrefill(model, self.runner.tokenize(group)[0])
        layers = []
        with torch.no_grad():
            for module, hidden, keys, values, kwargs in shared.layers:
                module.rotary_emb = model.model.rotary_emb  # as ``SharedPrefill._ready`` sets it
                q = window_queries(module, hidden, kwargs, WINDOW).float().cpu().numpy()[0]
                pos = key_positions(kwargs, keys.shape[2], keys.shape[0])[0]
                layers.append(LayerInput(keys.float().cpu().numpy()[0], values.float().cpu().numpy()[0], q, pos,
                                         int(module.layer_idx), len(shared.layers)))
        return layers


def kept(sub: Any, parts: dict[str, np.ndarray], shape: tuple[int, int, int], budget: int) -> list[bytes]:
    """What the cache keeps of one layer given the method's raw answer (validated as the press validates it)."""
    from ..submissions.sandbox import validate_indices, validate_rewrite, validate_scores

    heads, tokens, _ = shape
    if sub.returns == "scores":
        scores = validate_scores(parts["out"], heads, tokens)
        if getattr(sub, "allocation", "uniform") == "head_adaptive":
            return [np.sort(np.argsort(-scores.ravel(), kind="stable")[: budget * heads]).tobytes()]
        return [np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :budget], axis=1).tobytes()]
    validate_indices(parts["out"], heads, tokens, budget)
    idx, new = validate_rewrite(parts, parts["out"], shape)
    return [idx.tobytes()] + [k.encode() + new[k].tobytes() for k in sorted(new)]


def one_context(sub: Any, layers: list[LayerInput], ratios: list[float], limits: Any, wall: Any, digest: Any) -> None:
    """Feed ``digest`` the kept tokens of one context x ``ratios`` x layers (module doc), in a fresh sandbox (the
    runner's: ``board_runner.over_contexts``) under the run's wall budget ``wall``."""
    from kvpress.utils import compute_n_kept

    from ..submissions.sandbox import MethodSandbox

    box = MethodSandbox(sub, limits, budget=wall)
    try:
        for ratio in ratios:
            for x in layers:
                n = compute_n_kept(x.keys.shape[1], ratio)
                parts = box.call_parts({"keys": x.keys, "values": x.values, "queries": x.queries,
                                        "positions": x.positions}, budget=n, layer=x.layer, n_layers=x.n_layers,
                                       compression_ratio=float(ratio))
                for chunk in kept(sub, parts, x.keys.shape, n):
                    digest.update(len(chunk).to_bytes(8, "little") + chunk)
    finally:
        box.close()


def digestible(sub: Any, board: Any) -> bool:
    """Does the digest see what the board runs of ``sub``? Its ``score``/``keep`` on the context's own window
    (not a probe, whole-cache or decode-time hook: those have no digest yet)."""
    whole = getattr(sub, "whole_cache", False) and getattr(board, "allows_whole_cache", False)
    return sub.returns in ("scores", "indices") and not getattr(sub, "probes", ()) and not whole \
        and not getattr(board, "decode_time", False)


def behaviour_digest(sub: Any, contexts: Iterable[list[LayerInput]], ratios: list[float], limits: Any,
                     runs: int = DIGEST_RUNS) -> str | None:
    """``program_behaviour`` of ``sub`` (module doc): the digest of ``runs`` runs (each context in a fresh
    sandbox per run, one wall budget per run) when they agree, ``UNSTABLE`` when they differ, ``FAILED`` when the
    program fails on the inputs. ``limits``: a ``sandbox.Limits`` or ``Arena.submit``'s keywords. None (no
    digest; a warning) when the harness cannot make the inputs: nothing the program does reaches that, so no
    program buys its way out of a digest, and no harness fault makes every program one; ``BoundaryUnavailable``
    (the machine's fault) propagates, as in the run."""
    import warnings

    from ...sandbox import BoundaryUnavailable, Limits, WallBudget

    digests = [hashlib.sha256(b"behaviour:v1") for _ in range(runs)]
    try:
        limits = limits if isinstance(limits, Limits) else Limits.of(**limits)  # bad ones: the run refuses them
        walls = [WallBudget(limits.wall_s) for _ in range(runs)]
        for layers in contexts:
            for digest, wall in zip(digests, walls, strict=True):
                try:
                    one_context(sub, layers, ratios, limits, wall, digest)
                except BoundaryUnavailable:
                    raise
                except Exception:  # noqa: BLE001 - a failing program has the one digest every failing one has
                    return FAILED
    except BoundaryUnavailable:
        raise
    except Exception as err:  # noqa: BLE001 - the harness failed: the look is recorded without the digest
        warnings.warn(f"program_behaviour not computed: the harness failed ({type(err).__name__}: {err})",
                      stacklevel=2)
        return None
    found = {d.hexdigest() for d in digests}
    return found.pop() if len(found) == 1 else UNSTABLE
