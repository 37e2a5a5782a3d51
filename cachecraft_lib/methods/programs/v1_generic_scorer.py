"""The V1-family generic scorer (paper, discovery stage V1): five generic signals, tokenwise top-k.

The paper names V1 only as "5 generic signals, tokenwise"; this suite defines it as an equal-weight
sum of five MaxAbs-normalised generic signals: global attention, last-query attention, key norm,
recency (relative position) and the sink mask. No local window, no density, no chunks.
"""

from cachecraft_lib.policy import maxabs, topk_tokens

# EVOLVE-BLOCK-START
WEIGHTS = (0.2, 0.2, 0.2, 0.2, 0.2)


def score_tokens(ctx):
    signals = (maxabs(ctx.global_attn), maxabs(ctx.last_query_attn), maxabs(ctx.key_norm),
               ctx.rel_position, ctx.sink_mask)
    return sum(w * s for w, s in zip(WEIGHTS, signals, strict=True))


def select_tokens_to_keep(scores, ctx):
    return topk_tokens(scores, ctx)
# EVOLVE-BLOCK-END
