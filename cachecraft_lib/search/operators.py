"""Structural edit operators of the offline mutator (opt-in: ``OfflineMutator(structural=True)``).

The default offline mutator only perturbs one linear scorer. These operators edit the *shape* of a policy,
over the space the arena's winners used (a score multiplied by a second score, as wherewhat_a multiplied
SnapKV by a reconstruction score; heads voting, as spanvote did, through the per-head features), while
every program they write still keeps exactly ``ctx.K`` tokens, so the search's invariants and the arena's
budget hold unchanged.

``lift`` first rewrites a linear-scorer EVOLVE-BLOCK (the V1 seed's) into the structured form below, which
scores exactly as the program it replaces while its new knobs sit at their neutral values (COMBINE "none",
no sinks, no window, no pooling, a flat layer shape). Each operator then changes one knob:

- ``combine``: COMBINE = "product" (score A x score B, both scaled to [0, 1]), "max" (elementwise max) or
  "none" (score A alone);
- ``second``: swap, add or re-weight one feature of score B (the second scorer);
- ``sinks``: SINKS = the first n tokens always kept (0, 2, 4, 8, 16);
- ``window``: WINDOW = the last n tokens always kept (0, 8, 16, 32, 64): the question window, which on a
  query-aware board holds the question;
- ``pool``: POOL = chunk pooling, the score blended with its mean over CHUNK-token chunks (0, 0.25, 0.5, 0.75);
- ``chunk``: CHUNK = the pooling chunk length (4, 8, 16, 32);
- ``layer_shape``: LAYER_SHAPE = "flat", "pyramid" (early layers lean towards the attention-free position
  prior, as PyramidKV spends more of its budget on broad early layers) or "inverse" (the late layers do);
- ``question``: swap score B's first feature for a question-window attention signal (local_attn: the last
  32 queries; last_query_attn: the last one), the signal a query-aware board rewards.

Per-layer and per-head *budget* shapes (a layer or head keeping more than K tokens, AdaKV-like) cannot be
written as a policy program: the program interface fixes exactly K tokens per layer; they need the arena's
method interface (``keep`` with per-head indices). Every operator is deterministic for its random source.
"""

from __future__ import annotations

import ast
import random
import re

from ..methods.features import FEATURES

START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"
KNOBS = ("FEATURES_B", "WEIGHTS_B", "COMBINE", "SINKS", "WINDOW", "POOL", "CHUNK", "LAYER_SHAPE")
OPERATORS = ("combine", "second", "sinks", "window", "pool", "chunk", "layer_shape", "question")
CHOICES = {"COMBINE": ("none", "product", "max"), "SINKS": (0, 2, 4, 8, 16), "WINDOW": (0, 8, 16, 32, 64),
           "POOL": (0.0, 0.25, 0.5, 0.75), "CHUNK": (4, 8, 16, 32), "LAYER_SHAPE": ("flat", "pyramid", "inverse")}
QUESTION_FEATURES = ("local_attn", "last_query_attn")

STRUCTURED_BODY = '''FEATURES = {features}
WEIGHTS = {weights}
SMOOTH = {smooth}
SELECTION = {selection}
FEATURES_B = ("value_norm",)
WEIGHTS_B = (1.0,)
COMBINE = "none"
SINKS = 0
WINDOW = 0
POOL = 0.0
CHUNK = 16
LAYER_SHAPE = "flat"


def _linear(ctx, names, weights):
    score = np.zeros(ctx.L, dtype=np.float32)
    for name, weight in zip(names, weights, strict=True):
        score = score + weight * maxabs(ctx[name])
    return score


def _unit(x):
    low, high = float(x.min()), float(x.max())
    return (x - low) / (high - low) if high > low else np.zeros_like(x)


def score_tokens(ctx):
    score = _linear(ctx, FEATURES, WEIGHTS)
    if COMBINE == "product":
        score = _unit(score) * _unit(_linear(ctx, FEATURES_B, WEIGHTS_B))
    elif COMBINE == "max":
        score = np.maximum(_unit(score), _unit(_linear(ctx, FEATURES_B, WEIGHTS_B)))
    if LAYER_SHAPE != "flat":
        depth = min(1.0, ctx.layer / 30.0)
        lean = (1.0 - depth) if LAYER_SHAPE == "pyramid" else depth
        score = (1.0 - 0.5 * lean) * _unit(score) + 0.5 * lean * maxabs(ctx["rel_position"])
    if POOL > 0:
        n = ctx.L
        pad = np.zeros(-(-n // CHUNK) * CHUNK, dtype=np.float32)
        pad[:n] = score
        means = np.repeat(pad.reshape(-1, CHUNK).mean(axis=1), CHUNK)[:n]
        score = (1.0 - POOL) * score + POOL * means
    if SMOOTH > 1:
        score = np.convolve(score, np.ones(SMOOTH, dtype=np.float32) / SMOOTH, mode="same")
    return score


def select_tokens_to_keep(scores, ctx):
    scores = np.array(scores, dtype=np.float32)
    bonus = float(np.abs(scores).max()) + 1.0
    if SINKS > 0:
        scores[:SINKS] += bonus
    if WINDOW > 0:
        scores[-WINDOW:] += bonus
    if SELECTION == "chunked":
        return topk_chunks(scores, ctx)
    return topk_tokens(scores, ctx)'''


def _diff(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def _fmt(values: tuple) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _line(code: str, name: str) -> re.Match | None:
    return re.search(rf"^{name} = (.+)$", code, re.MULTILINE)


def _value(code: str, name: str):
    match = _line(code, name)
    return ast.literal_eval(match.group(1).split("#")[0].strip()) if match else None


def is_structured(code: str) -> bool:
    """Whether ``code`` already has the structured form's knobs."""
    return all(_line(code, k) for k in KNOBS)


def block_text(code: str) -> str:
    """The lines between the EVOLVE-BLOCK markers (exclusive), exactly as written."""
    start, end = code.index(START) + len(START) + 1, code.index(END)
    return code[start:end].rstrip("\n")


def lift_body(scorer: dict) -> str:
    """The structured block holding a linear scorer's FEATURES, WEIGHTS, SMOOTH and SELECTION."""
    return STRUCTURED_BODY.format(features=_fmt(tuple(scorer["FEATURES"])), weights=_fmt(tuple(scorer["WEIGHTS"])),
                                  smooth=scorer["SMOOTH"], selection=repr(scorer["SELECTION"]))


def lift(code: str, scorer: dict) -> tuple[str, str]:
    """The diff that rewrites a linear-scorer block into the structured form, same scores (module doc)."""
    return _diff(block_text(code), lift_body(scorer)), "lift to the structured form (neutral knobs)"


def _set(code: str, name: str, value) -> str:
    text = repr(value) if not isinstance(value, tuple) else _fmt(value)
    return _diff(_line(code, name).group(0), f"{name} = {text}")


def _other(rng: random.Random, choices: tuple, current) -> object:
    return rng.choice([c for c in choices if c != current])


def apply_operator(code: str, name: str, rng: random.Random) -> tuple[str, str]:
    """One structural edit ``name`` (``OPERATORS``) of a structured program: (diff, description)."""
    knob = {"combine": "COMBINE", "sinks": "SINKS", "window": "WINDOW", "pool": "POOL", "chunk": "CHUNK",
            "layer_shape": "LAYER_SHAPE"}.get(name)
    if knob:
        new = _other(rng, CHOICES[knob], _value(code, knob))
        return _set(code, knob, new), f"{knob} = {new!r}"
    feats, weights = list(_value(code, "FEATURES_B")), list(_value(code, "WEIGHTS_B"))
    if name == "question":
        new = _other(rng, QUESTION_FEATURES, feats[0])
        desc, feats[0] = f"score B: question-window attention {new} for {feats[0]}", new
    elif name == "second":
        kind = rng.choice(["swap", "add", "weight"] + (["remove"] if len(feats) > 1 else []))
        i = rng.randrange(len(feats))
        if kind == "swap":
            new = rng.choice([f for f in FEATURES if f not in feats])
            desc, feats[i] = f"score B: swap {feats[i]} for {new}", new
        elif kind == "add":
            new = rng.choice([f for f in FEATURES if f not in feats])
            feats.append(new)
            weights.append(0.3)
            desc = f"score B: add {new}"
        elif kind == "remove":
            desc = f"score B: remove {feats.pop(i)}"
            weights.pop(i)
        else:
            weights[i] = round(max(0.05, weights[i] * rng.uniform(0.6, 1.4)), 3)
            desc = f"score B: re-weight {feats[i]}"
    else:
        raise ValueError(f"unknown structural operator {name!r}; operators: {', '.join(OPERATORS)}")
    total = sum(abs(w) for w in weights) or 1.0
    weights = [round(w / total, 3) for w in weights]
    search = _line(code, "FEATURES_B").group(0) + "\n" + _line(code, "WEIGHTS_B").group(0)
    return _diff(search, f"FEATURES_B = {_fmt(tuple(feats))}\nWEIGHTS_B = {_fmt(tuple(weights))}"), desc


def structural_edit(code: str, scorer: dict, rng: random.Random) -> tuple[str, str]:
    """A structural proposal: one random operator; a linear scorer is ``lift``-ed first, in the same answer
    (OpenEvolve applies the SEARCH/REPLACE blocks in order), so no iteration is spent on a neutral rewrite."""
    prefix, desc_prefix = "", ""
    if not is_structured(code):
        prefix, desc_prefix = lift(code, scorer)[0], "lift to the structured form, then "
        code = code.replace(block_text(code), lift_body(scorer), 1)
    diff, desc = apply_operator(code, rng.choice(OPERATORS), rng)
    return prefix + diff, desc_prefix + desc
