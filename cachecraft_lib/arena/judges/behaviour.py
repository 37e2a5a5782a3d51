"""What a submission keeps on probe layers, beside what each baseline's form keeps: copies by behaviour.

Token similarity reads structure, so it misses a baseline rewritten with other operations (loops instead of
array calls) and cannot tell a sign flip (keeping the largest key norms instead of the smallest reads like
K-norm). Running the method answers both: on a few seeded synthetic layers (the arena's ``Layer``: keys
and the window's queries after RoPE, random but fixed) at two budgets, the share of kept entries it has in
common with each baseline's numpy form (``numpy_baselines``). ``overlap >= SAME`` is the same method whatever its
code; below ``DIFFERENT`` it is another method whatever its tokens.

Synthetic probes alone can be evaded (a method can recognise their fixed shapes), so the judge also runs the
method and every form on real board layers it draws itself (``layers.board_layers``: the board's model on
fresh contexts, as a board's test items are drawn); the overlap that counts is the larger of the two.

The method runs in the arena's sandbox (``sandbox.MethodSandbox``: its own process, CPU and memory limits,
no files or network), as ``arena dev`` runs it, with the board's limits and in the board's exact call sequence
(``replay``: a fresh sandbox per context and hook, budget by budget, layer by layer), so it cannot tell the
judge's real layers from a board's by how it is called; its answers are validated here. A method that fails on the
judge's inputs (a crash, a timeout, an invalid answer) is itself suspicious: ``Behaviour.failed`` says so and
the rule judge flags it (``CRASHED_ON_JUDGE_INPUTS``); one the checks refuse before running (no hook, bad
code) is only noted. Decode-only methods (board C) have no prefill hook to probe.

Every prefill hook the submission declares is run the way the harness runs it, so that no hook hides a method
from the judge:

- ``score``/``keep``: once per layer; a ``keep`` may answer with a ``Rewrite`` (its contents are validated as the
  keep press validates them; the entries it keeps are what is compared);
- probes (``metadata.yaml``'s ``probes``): the per-layer hook gets ``probe_queries``/``probe_lengths``. On real
  layers they are the model's queries for the declared texts replayed after the judge's context
  (``layers.BoardLayers.probed``: the probe press's own replay). On the synthetic probes (and on real layers
  that cannot replay), ``synthetic_probes``: per probe ``probe_tokens(text)`` queries (its words, at most
  ``MAX_PROBE_TOKENS``) drawn like the layer's window queries from a generator seeded by the layer's index, so
  both budgets of a layer see the same probe;
- ``whole_cache`` (when the submission names a board whose rules run it, as the harness would): one call per
  context and budget with all of that context's layers (``caches`` groups them; the probes are one context of
  ``LAYERS`` layers), validated as the whole-cache press validates it (``whole_cache.split_whole``); its
  overlaps are kept under ``"<set> whole_cache"`` beside the per-layer hook's ``"<set>"``.

The overlap that counts is the largest over every set of layers and every hook. ``allocation: head_adaptive``
is not simulated: the comparison uses each head's own top ``budget`` of the scores (the rule judge names the
allocation from the metadata).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..submissions.folder import Submission, SubmissionError, check_hooks, load_submission, method_names
from ..submissions.method_api import ARRAYS, Layer
from ..submissions.probes import MAX_PROBE_TOKENS, check_probes
from ..submissions.sandbox import (
    REWRITE_SCALE,
    Limits,
    MethodSandbox,
    validate_indices,
    validate_rewrite,
    validate_scores,
)
from .bundle import Bundle
from .numpy_baselines import FORMS
from .replay import board_order, contexts

SAME, DIFFERENT = 0.98, 0.90
SHAPE = {"heads": 2, "groups": 2, "tokens": 128, "window": 32, "dim": 16}
LAYERS, RATIOS, SEED = 3, (0.5, 0.25), 0


def probe_layers(seed: int = SEED) -> list[Layer]:
    """Seeded synthetic layers; keys carry a per-token scale so that norms and attention vary across tokens."""
    rng = np.random.default_rng(seed)
    h, g, n, w, d = (SHAPE[k] for k in ("heads", "groups", "tokens", "window", "dim"))
    out = []
    for index in range(LAYERS):
        scale = rng.lognormal(0.0, 0.5, size=(1, n, 1)).astype(np.float32)
        keys = (rng.standard_normal((h, n, d)) * scale).astype(np.float32)
        values = rng.standard_normal((h, n, d)).astype(np.float32)
        queries = rng.standard_normal((h * g, w, d)).astype(np.float32)
        for ratio in RATIOS:
            budget = int(n * (1 - ratio))
            out.append(Layer(keys, values, queries, np.arange(n, dtype=np.int64), budget, index, LAYERS, ratio))
    return out


def kept(scores: np.ndarray, budget: int, heads: int) -> list[set[int]]:
    """The ``budget`` highest scores per head (ties to the lower index, the same rule for every side)."""
    scores = np.broadcast_to(np.asarray(scores, dtype=np.float64), (heads, scores.shape[-1]))
    return [set(np.argsort(-row, kind="stable")[:budget].tolist()) for row in scores]


def overlap(a: list[list[set[int]]], b: list[list[set[int]]]) -> float:
    """Mean share of kept entries two methods have in common, over layers, budgets and heads."""
    shares = [len(x & y) / max(len(x), 1) for la, lb in zip(a, b, strict=True) for x, y in zip(la, lb, strict=True)]
    return float(np.mean(shares))


def probe_tokens(text: str) -> int:
    """The tokens a synthetic probe stands for: its words, 1 to ``MAX_PROBE_TOKENS``."""
    return max(1, min(MAX_PROBE_TOKENS, len(text.split())))


def synthetic_probes(layers: list[Layer], probes: tuple[str, ...]) -> list[Layer]:
    """``layers`` with seeded probe queries (see the module doc): what the judge gives a probing method where no
    model can replay its probes."""
    out = []
    for layer in layers:
        rng = np.random.default_rng((SEED, 1, layer.layer))
        heads, dim = layer.queries.shape[0], layer.queries.shape[2]
        parts = [rng.standard_normal((heads, probe_tokens(p), dim)).astype(np.float32) for p in probes]
        out.append(replace(layer, probe_queries=np.concatenate(parts, axis=1),
                           probe_lengths=np.array([q.shape[1] for q in parts], np.int64)))
    return out


def with_probes(layers: list[Layer], probes: tuple[str, ...]) -> list[Layer]:
    """The layers as a method with ``probes`` receives them: replayed on real layers that can, else synthetic."""
    if not probes:
        return layers
    probed = getattr(layers, "probed", None)
    return probed(probes) if probed is not None else synthetic_probes(layers, probes)


def caches(layers: list[Layer]) -> list[list[int]]:
    """The indices of ``layers`` grouped into whole caches: per context and budget, layers 0..n_layers-1 in order
    (a context's layers arrive layer by layer, each at every budget)."""
    open_: dict[tuple, list[int]] = {}
    done: list[list[int]] = []
    for i, layer in enumerate(layers):
        key = (layer.compression_ratio, layer.n_tokens, layer.n_layers)
        group = open_.setdefault(key, [])
        if layer.layer != len(group):
            raise ValueError(f"layer {layer.layer} arrives where layer {len(group)} of a cache was expected: the "
                             "judge's layers must come context by context, every layer at every budget")
        group.append(i)
        if len(group) == layer.n_layers:
            done.append(open_.pop(key))
    if open_:
        raise ValueError(f"{len(open_)} incomplete cache(s) among the judge's layers")
    return done


def _as_submission(bundle: Bundle) -> Submission:
    """The bundle's submission; one whose DESCRIPTION or metadata would be refused is still probed (with the hooks
    its code defines, the probes and boards its metadata declares where they are valid)."""
    try:
        return load_submission(bundle.folder)
    except SubmissionError as err:
        if err.kind not in ("bad_description", "bad_metadata", "reserved_name"):  # an identity is metadata too
            raise
    code = bundle.code.encode("utf-8")
    returns, decode = check_hooks(code)
    whole = "whole_cache" in method_names(code)
    if returns == "none" and not whole:
        raise SubmissionError("bad_method", "no prefill hook (score, keep or whole_cache) to probe")
    try:
        probes = check_probes(bundle.metadata.get("probes"))
    except SubmissionError:
        probes = ()
    boards = bundle.metadata.get("boards")
    boards = tuple(boards) if isinstance(boards, list) and all(isinstance(b, str) for b in boards) else ("A",)
    return Submission(bundle.folder, bundle.name, bundle.author, boards, bundle.code_sha256, returns, decode,
                      code=code, probes=probes, whole_cache=whole)


def _runs_whole_cache(sub: Submission) -> bool:
    """Whether a board the submission names runs its ``whole_cache`` (as the harness decides)."""
    from ..boards.boards import whole_cache_boards

    return sub.whole_cache and bool(set(sub.boards) & whole_cache_boards())


def _hooks(sub: Submission) -> list[str]:
    """The prefill hooks the judge runs: ``layer`` (score/keep) and/or ``whole_cache``."""
    hooks = (["layer"] if sub.returns in ("scores", "indices") else []) + \
        (["whole_cache"] if _runs_whole_cache(sub) else [])
    if not hooks:
        raise SubmissionError("bad_method", "no prefill hook (score, keep or a whole_cache a named board runs) "
                                            "to probe")
    return hooks


def _rows(out: np.ndarray, heads: int) -> list[set[int]]:
    return [set(np.asarray(row).tolist()) for row in np.broadcast_to(out, (heads, out.shape[-1]))]


def _checked_rewrite(parts: dict[str, np.ndarray], layer: Layer) -> None:
    """A ``Rewrite``'s contents validated as the keep press validates them (shape, float32, finite, bounded)."""
    if set(parts) - {"out"}:
        bounds = {"keys": REWRITE_SCALE * float(np.abs(layer.keys).max()),
                  "values": REWRITE_SCALE * float(np.abs(layer.values).max())}
        validate_rewrite(parts, parts["out"], layer.keys.shape, None, bounds)


def _layer_kept(box: MethodSandbox, sub: Submission, layers: list[Layer]) -> list[list[set[int]]]:
    """``score``/``keep`` once per layer (with the probes' queries when it declares probes)."""
    out = []
    for layer in layers:
        arrays = {name: getattr(layer, name) for name in ARRAYS}
        if sub.probes:
            arrays |= {"probe_queries": layer.probe_queries, "probe_lengths": layer.probe_lengths}
        parts = box.call_parts(arrays, budget=layer.budget, layer=layer.layer, n_layers=layer.n_layers,
                               compression_ratio=layer.compression_ratio)
        heads, tokens = layer.keys.shape[:2]
        if sub.returns == "scores":
            if set(parts) != {"out"}:
                raise SubmissionError("bad_output", f"layer {layer.layer}: score() returned a Rewrite")
            out.append(kept(validate_scores(parts["out"], heads, tokens), layer.budget, heads))
        else:
            out.append(_rows(validate_indices(parts["out"], heads, tokens, layer.budget), heads))
            _checked_rewrite(parts, layer)
    return out


def _whole_kept(box: MethodSandbox, layers: list[Layer]) -> list[list[set[int]]]:
    """``whole_cache`` once per context and budget with all of its layers, as the whole-cache press calls it."""
    from ..submissions.whole_cache import pack, split_whole

    out: list = [None] * len(layers)
    for group in caches(layers):
        cache = [layers[i] for i in group]
        first = cache[0]
        raw = box.call_whole(pack([{name: getattr(layer, name) for name in ARRAYS} for layer in cache]),
                             budget=first.budget, layer=0, n_layers=len(cache),
                             compression_ratio=first.compression_ratio)
        heads, tokens = first.keys.shape[:2]
        for i, layer, parts in zip(group, cache, split_whole(raw, len(cache), heads, tokens, first.budget),
                                   strict=True):
            _checked_rewrite(parts, layer)
            out[i] = _rows(parts["out"], heads)
    return out


def _submission_kept(bundle: Bundle, layers: list[Layer], limits: Limits) -> dict[str, list[list[set[int]]]]:
    """Per hook the submission's prefill boards run (``layer``, ``whole_cache``), what it keeps on ``layers``:
    called as a board calls it (``replay``: a fresh sandbox per context and hook, budget by budget, layer by
    layer), whatever order ``layers`` come in."""
    sub = _as_submission(bundle)
    hooks = _hooks(sub)
    probed = with_probes(layers, sub.probes) if "layer" in hooks else layers
    found: dict[str, list] = {hook: [None] * len(layers) for hook in hooks}
    for context in contexts(layers):
        order = board_order(context, layers)
        for hook in hooks:  # a board runs one hook per context: each gets a sandbox of its own
            with MethodSandbox(sub, limits) as box:
                kept_here = (_layer_kept(box, sub, [probed[i] for i in order]) if hook == "layer"
                             else _whole_kept(box, [layers[i] for i in order]))
            for i, rows in zip(order, kept_here, strict=True):
                found[hook][i] = rows
    return found


@dataclass(frozen=True)
class Behaviour:
    """What the submission keeps beside each form: ``overlap`` (the larger of probes and real layers),
    per set of layers, and ``failed`` (why it failed on the judge's inputs, None when it did not)."""

    overlap: dict[str, float] = field(default_factory=dict)
    by_layers: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: str | None = None
    note: str = ""


def _overlaps(mine: list[list[set[int]]], layers: list[Layer]) -> dict[str, float]:
    return {name: round(overlap(mine, [kept(form(layer), layer.budget, layer.keys.shape[0]) for layer in layers]), 4)
            for name, form in FORMS.items()}


REFUSED_BEFORE_RUNNING = ("bad_method", "bad_import", "file_access", "network", "missing_file", "bad_folder",
                          "bad_params")  # refused by the folder checks: noted, not a crash on the judge's inputs


def measure(bundle: Bundle, real: list[Layer] | None = None, limits: Limits | None = None) -> Behaviour:
    """The submission on the synthetic probes and, when given, on ``real`` board layers (``layers``), through every
    prefill hook it declares (see the module doc)."""
    limits = limits or Limits()  # the board's own limits: a method cannot tell the judge by what it may use
    sets = {"probe": probe_layers(), **({"real": real} if real else {})}
    by: dict[str, dict[str, float]] = {}
    for label, layers in sets.items():
        try:
            found = _submission_kept(bundle, layers, limits)
        except SubmissionError as err:
            if err.kind in REFUSED_BEFORE_RUNNING and not by:
                return Behaviour(note=f"behaviour not measured ({err})")
            return Behaviour(by_layers=by, failed=f"{label} layers: {str(err)[:300]}",
                             note=f"the method failed on the judge's {label} layers ({str(err)[:300]})")
        for hook, mine in found.items():
            by[label if hook == "layer" else f"{label} {hook}"] = _overlaps(mine, layers)
    combined = {name: max(v[name] for v in by.values()) for name in FORMS}
    best = max(combined, key=combined.get)
    where = " and ".join(f"{len(sets[k])} {k}" for k in sets)
    per = "; ".join(f"{k} {v[best]:.2f}" for k, v in by.items())
    return Behaviour(combined, by, None, f"behaviour on {where} layers: keeps {combined[best]:.2f} of what the {best} "
                                         f"form keeps ({per}; same method from {SAME})")


def behaviour(bundle: Bundle, limits: Limits | None = None, real: list[Layer] | None = None
              ) -> tuple[dict[str, float], str]:
    """(form name -> overlap with the submission, note); empty with the reason when it cannot be measured."""
    result = measure(bundle, real, limits)
    return result.overlap, result.note
