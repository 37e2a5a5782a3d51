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
no files or network), as ``arena dev`` runs it; its answers are validated there. A method that fails on the
judge's inputs (a crash, a timeout, an invalid answer) is itself suspicious: ``Behaviour.failed`` says so and
the rule judge flags it (``CRASHED_ON_JUDGE_INPUTS``); one the checks refuse before running (no hook, bad
code) is only noted. Decode-only methods (board C) have no prefill hook to probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..submissions.folder import Submission, SubmissionError, check_method, load_submission
from ..submissions.method_api import Layer
from ..submissions.sandbox import Limits, MethodSandbox
from .bundle import Bundle
from .numpy_baselines import FORMS

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


def _as_submission(bundle: Bundle) -> Submission:
    """The bundle's submission; one whose DESCRIPTION or metadata would be refused is still probed."""
    try:
        return load_submission(bundle.folder)
    except SubmissionError as err:
        if err.kind not in ("bad_description", "bad_metadata"):
            raise
    code = bundle.code.encode("utf-8")
    return Submission(bundle.folder, bundle.name, bundle.author, ("A",), bundle.code_sha256, check_method(code),
                      code=code)


def _submission_kept(bundle: Bundle, layers: list[Layer], limits: Limits) -> list[list[set[int]]]:
    sub = _as_submission(bundle)
    if sub.returns not in ("scores", "indices"):
        raise SubmissionError("bad_method", "no prefill hook (score or keep) to probe")
    out = []
    with MethodSandbox(sub, limits) as box:
        for layer in layers:
            arrays = {"keys": layer.keys, "values": layer.values, "queries": layer.queries,
                      "positions": layer.positions}
            answer = box.answer(arrays, budget=layer.budget, layer=layer.layer, n_layers=layer.n_layers,
                                compression_ratio=layer.compression_ratio)
            heads = layer.keys.shape[0]
            out.append(kept(answer, layer.budget, heads) if sub.returns == "scores"
                       else [set(np.asarray(row).tolist()) for row in np.broadcast_to(answer, (heads, answer.shape[-1]))])
    return out


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


REFUSED_BEFORE_RUNNING = ("bad_method", "bad_import", "file_access", "network", "missing_file")


def measure(bundle: Bundle, real: list[Layer] | None = None, limits: Limits | None = None) -> Behaviour:
    """The submission on the synthetic probes and, when given, on ``real`` board layers (``layers``)."""
    limits = limits or Limits(timeout_s=10.0, memory_mb=512, load_s=30.0)
    sets = {"probe": probe_layers(), **({"real": real} if real else {})}
    by: dict[str, dict[str, float]] = {}
    for label, layers in sets.items():
        try:
            by[label] = _overlaps(_submission_kept(bundle, layers, limits), layers)
        except SubmissionError as err:
            if err.kind in REFUSED_BEFORE_RUNNING and not by:
                return Behaviour(note=f"behaviour not measured ({err})")
            return Behaviour(by_layers=by, failed=f"{label} layers: {str(err)[:300]}",
                             note=f"the method failed on the judge's {label} layers ({str(err)[:300]})")
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
