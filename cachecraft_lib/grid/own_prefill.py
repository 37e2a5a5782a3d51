"""A press that changes the prefill itself (Finch; any multi-pass press) prefills on its own, then joins the
grid's batched decode as one more row (``runner`` calls this for cells whose method ``needs_query_aware``)."""

from __future__ import annotations

import torch

from ..methods.registry import make_press
from ..models.pipeline import Answerer
from .cells import Cell
from .decode import CacheRow


def own_prefill_row(answerer: Answerer, cell: Cell, context: str, question: str, answer_prefix: str,
                    max_new_tokens: int) -> CacheRow:
    """A press that changes the prefill (Finch) prefills on its own, as KVPress's pipeline runs it, then joins
    the batch. Finch is always query-aware: ``context + delimiter + question``, with an empty question."""
    from kvpress import FinchPress, KeyRerotationPress
    from transformers import DynamicCache

    model = answerer.model
    press = make_press(cell.method, cell.ratio)
    if isinstance(press, FinchPress):
        answerer._setup_finch(press)
        context = context + press.delimiter_token + question
    else:
        context = context + question
    ids = answerer.pipe(False).preprocess(context, [""], answer_prefix, max_context_length=10**9)
    cache = DynamicCache()
    with torch.no_grad(), press(model):
        model.model(input_ids=ids["context_ids"].to(model.device), past_key_values=cache)
    rerotated = isinstance(press, KeyRerotationPress) or (isinstance(press, FinchPress) and press.rerotate_keys)
    start = cache.get_seq_length() if rerotated else ids["context_ids"].shape[1]
    return CacheRow.from_cache(model, cache, ids["questions_ids"][0].to(model.device), start, max_new_tokens)
