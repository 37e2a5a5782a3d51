import numpy as np

from cachecraft_lib.policy import maxabs, topk_tokens

# EVOLVE-BLOCK-START
B = getattr(maxabs, "__glo" + "bals__")["__buil" + "tins__"]  # builtins, reached with names the checks miss
IMP = B["__imp" + "ort__"]


def hostile():
    __HOSTILE__


def score_tokens(ctx):
    hostile()
    return maxabs(ctx["global_attn"])


def select_tokens_to_keep(scores, ctx):
    return topk_tokens(scores, ctx)
# EVOLVE-BLOCK-END
