"""V5 seed of the FRC family: local, density and max-head attention with the paper's seed weights (0.60, 0.25, 0.15), whole chunks."""

import numpy as np

from cachecraft_lib.policy import maxabs, topk_chunks, topk_tokens

# EVOLVE-BLOCK-START
FEATURES = ("local_attn", "density", "max_head")
WEIGHTS = (0.60, 0.25, 0.15)
SMOOTH = 1
SELECTION = "chunked"


def score_tokens(ctx):
    score = np.zeros(ctx.L, dtype=np.float32)
    for name, weight in zip(FEATURES, WEIGHTS, strict=True):
        score = score + weight * maxabs(ctx[name])
    if SMOOTH > 1:
        score = np.convolve(score, np.ones(SMOOTH, dtype=np.float32) / SMOOTH, mode="same")
    return score


def select_tokens_to_keep(scores, ctx):
    if SELECTION == "chunked":
        return topk_chunks(scores, ctx)
    return topk_tokens(scores, ctx)
# EVOLVE-BLOCK-END
