"""V1 seed: five generic signals with equal weights, tokenwise top-K (the paper's discovery stage V1)."""

import numpy as np

from cachecraft_lib.policy import maxabs, topk_chunks, topk_tokens

# EVOLVE-BLOCK-START
FEATURES = ('global_attn', 'last_query_attn', 'key_norm', 'rel_position', 'sink_mask', 'density', 'chunk_rank')
WEIGHTS = (0.21, 0.23, 0.019, 0.039, 0.064, 0.348, 0.09)
SMOOTH = 9
SELECTION = "tokenwise"


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
