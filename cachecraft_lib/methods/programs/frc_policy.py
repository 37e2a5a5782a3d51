"""FRC written as a policy program: the form CacheCraft's search evolves.

score = 0.55 * local^ + 0.30 * density^ + 0.15 * maxhead^ (MaxAbs-normalised), then whole chunks of
20 tokens by mean score. ``PolicyPress`` on this file keeps exactly the indices ``FRCPress`` keeps.
"""

from cachecraft_lib.policy import maxabs, topk_chunks

# EVOLVE-BLOCK-START
WEIGHTS = (0.55, 0.30, 0.15)


def score_tokens(ctx):
    local = maxabs(ctx.local_attn)
    dens = maxabs(ctx.density)
    head = maxabs(ctx.max_head)
    return WEIGHTS[0] * local + WEIGHTS[1] * dens + WEIGHTS[2] * head


def select_tokens_to_keep(scores, ctx):
    return topk_chunks(scores, ctx)
# EVOLVE-BLOCK-END
