"""What a program *does* on a round's test contexts: ``program_behaviour`` and ``program_sketch`` (``plan_looks``).

Why: ``code_shape``'s digests see the code's form, and a red team (2026-12-05) re-entered one program under forms
that keep what it does (a dead ``pass``, ``x + 0``, a helper inlined, a loop unrolled, a name reached through
``getattr``): each a new shape, so each a fresh look at the test items. ``behaviour_probe`` runs the program in
the arena's sandbox exactly as the board runs it (a fresh sandbox per context; per budget, every layer in order;
the same arrays the press sends) on ``ProbeInputs``: ``Arena.behaviour`` gives it the first context of each task
and length of the round's **test** split (the organiser's side: the secret and the items never leave it), at every budget
of the board. Per layer it takes the kept (context, budget, layer, KV head, token) tuples: a ``score`` answer's
tokens as the press selects them (``torch.topk`` per head, or ``AdaKVPress`` itself when head-adaptive:
``behaviour_sketch.press_selection``), a ``keep`` answer's indices, and after a ``Rewrite`` what the cache holds
by content (each slot the original token whose key and value row it holds byte for byte, else its content's
hash: ``behaviour_sketch.cache_tokens``; sixth red team: decoy indices over the original's rows).
Ranks, not scores, so ``2 * s`` or ``s + 1`` is the same behaviour. It records the exact keyed digest of that
set (``program_behaviour``) and its keyed MinHash sketch (``program_sketch``), which ``plan_looks`` matches
when near (``behaviour_sketch.THRESHOLD``), so a variant changing a few kept tokens is the same look.

Until the fifth red team the inputs were the board's public dev contexts: a program could recognise them and
change one kept token there only, a fresh digest each time with the same behaviour on the test items. On the
test contexts themselves it cannot act otherwise without acting otherwise on scored items.

A program that fails on these inputs gets ``FAILED`` and one whose two runs differ gets ``UNSTABLE`` as its
``program_behaviour`` and no sketch (the sandbox does not load ``numpy.random``, but a string's ``hash`` and an
object's address differ per process): each one digest shared by every such program, so neither failing nor
randomness buys a fresh look, and an honest program (which runs, the same every time) never shares it; nor does
failing only in the probe (e.g. before an instant read from ``numpy.datetime64('now')``) buy a score: a run that
scores after such a probe is refused (``mismatch``). Left open: a program keying on the date to act otherwise
(not fail) in the probe, or acting otherwise only on test contexts that are not the first of their task; a
``Rewrite`` perturbing the original's rows by an ulp (coded as new content); a probe, whole-cache or decode-time
hook (no digest, as when the harness fails); the probe runs on test items before its look is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .behaviour_sketch import kept_codes, keyed_digest, minhash, sketch_key  # noqa: F401 (sketch_key: arena)

DIGEST_RUNS = 2  # runs compared: a program whose runs differ is UNSTABLE
KEEP_BYTES = 256 << 20  # the probe's inputs kept between submissions up to this size (``ProbeInputs``)
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
    """The items the probe runs on: the first context of each task and length (items in their split's order; by
    length too since the sixth red team: a program could act otherwise only at a length the probe never saw)."""
    firsts = items.drop_duplicates([c for c in ("task", "length") if c in items.columns], keep="first").context_id
    return items[items.context_id.isin(set(firsts))]


class ProbeInputs:
    """The probe's inputs for one board, round and model (``probe_items`` of ``items``): per context, its layers' inputs
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


def one_context(sub: Any, layers: list[LayerInput], ratios: list[float], limits: Any, wall: Any, context: int,
                found: list[np.ndarray]) -> None:
    """Append to ``found`` the kept tuples of one context x ``ratios`` x layers (module doc), in a fresh sandbox
    (the runner's: ``board_runner.over_contexts``) under the run's wall budget ``wall``."""
    from kvpress.utils import compute_n_kept

    from ..submissions.sandbox import MethodSandbox

    box = MethodSandbox(sub, limits, budget=wall)
    try:
        for b, ratio in enumerate(ratios):
            for x in layers:
                n = compute_n_kept(x.keys.shape[1], ratio)
                parts = box.call_parts({"keys": x.keys, "values": x.values, "queries": x.queries,
                                        "positions": x.positions}, budget=n, layer=x.layer, n_layers=x.n_layers,
                                       compression_ratio=float(ratio))
                found.append(kept_codes(sub, parts, x.keys.shape, n, (context, b, x.layer), (x.keys, x.values)))
    finally:
        box.close()


def mismatch(digests: dict[str, str]) -> Any:
    """The refusal of a run that scored after its probe gave ``FAILED`` or ``UNSTABLE`` (sixth red team: a program
    raising only in the probe, e.g. before an instant read from ``numpy.datetime64('now')``, took the shared
    marker and then scored as another program): a ``SubmissionError``, or None when the probe saw the program.
    The look stays counted; an honest program runs the same in both, so it never meets this."""
    from ..submissions.errors import SubmissionError

    what = {FAILED: "failed", UNSTABLE: "gave two different answers"}.get(digests.get("program_behaviour", ""))
    return None if what is None else SubmissionError(
        "behaviour_mismatch", f"the program {what} on the round's probe contexts but its test run "
                    "scored; the arena refuses a program whose probe and run differ")


def board_ratios(board: Any) -> list[float]:
    """The compression ratios of the board's budgets, in the board's order, as its runner computes them."""
    return [round(1.0 - keep, 6) for keep in board.budgets]


def digestible(sub: Any, board: Any) -> bool:
    """Does the digest see what the board runs of ``sub``? Its ``score``/``keep`` on the context's own window
    (not a probe, whole-cache or decode-time hook: those have no digest yet)."""
    whole = getattr(sub, "whole_cache", False) and getattr(board, "allows_whole_cache", False)
    return sub.returns in ("scores", "indices") and not getattr(sub, "probes", ()) and not whole \
        and not getattr(board, "decode_time", False)


def behaviour_probe(sub: Any, contexts: Iterable[list[LayerInput]], ratios: list[float], limits: Any, key: bytes,
                    runs: int = DIGEST_RUNS) -> dict[str, str]:
    """What a look records of what ``sub`` does (module doc): ``program_behaviour`` (the keyed exact digest) and
    ``program_sketch`` (``behaviour_sketch.minhash``) of ``runs`` runs (each context in a fresh sandbox per run,
    one wall budget per run) when they agree; ``program_behaviour`` alone, ``UNSTABLE``, when they differ, or
    ``FAILED`` when the program fails on the inputs. ``limits``: a ``sandbox.Limits`` or ``Arena.submit``'s
    keywords; ``key``: ``sketch_key`` of the round. Nothing (a warning) when the harness cannot make the inputs:
    nothing the program does reaches that, so no program buys its way out, and no harness fault makes every
    program one; ``BoundaryUnavailable`` (the machine's fault) propagates, as in the run."""
    import warnings

    from ...sandbox import BoundaryUnavailable, Limits, WallBudget

    found: list[list[np.ndarray]] = [[] for _ in range(runs)]
    try:
        limits = limits if isinstance(limits, Limits) else Limits.of(**limits)  # bad ones: the run refuses them
        walls = [WallBudget(limits.wall_s) for _ in range(runs)]
        for context, layers in enumerate(contexts):
            for codes, wall in zip(found, walls, strict=True):
                try:
                    one_context(sub, layers, ratios, limits, wall, context, codes)
                except BoundaryUnavailable:
                    raise
                except Exception:  # noqa: BLE001 - a failing program has the one digest every failing one has
                    return {"program_behaviour": FAILED}
    except BoundaryUnavailable:
        raise
    except Exception as err:  # noqa: BLE001 - the harness failed: the look is recorded without the digest
        warnings.warn(f"program_behaviour not computed: the harness failed ({type(err).__name__}: {err})",
                      stacklevel=2)
        return {}
    sets = [np.unique(np.concatenate(c)) if c else np.zeros(0, np.uint64) for c in found]
    if any(not np.array_equal(sets[0], s) for s in sets[1:]):
        return {"program_behaviour": UNSTABLE}
    return {"program_behaviour": keyed_digest(sets[0], key), "program_sketch": minhash(sets[0], key)}
