"""V1 seed: five generic signals with equal weights, tokenwise top-K (the paper's discovery stage V1)."""

import numpy as np

from cachecraft_lib.policy import maxabs, topk_chunks, topk_tokens

# EVOLVE-BLOCK-START
FEATURES = ('global_attn', 'last_query_attn', 'key_norm', 'local_attn', 'sink_mask')
WEIGHTS = (0.01, 0.572, 0.011, 0.378, 0.029)
SMOOTH = 9
SELECTION = 'tokenwise'
FEATURES_B = ('last_query_attn',)
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
    return topk_tokens(scores, ctx)
# EVOLVE-BLOCK-END
