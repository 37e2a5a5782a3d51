"""The 31 cells of one sample, two ways (step ``eightb``): the grid's way (one shared prefill, every cell's cache
compressed from it, Finch prefilled on its own, all decoded in one batch) and KVPress's pipeline per cell (a
prefill under the cell's press, then its greedy decode), CUDA-synchronised, with the answers compared."""

from __future__ import annotations

from typing import Any

import torch

from cachecraft_lib.util.timers import clock


def _finch_prefill(model: Any, ids: torch.Tensor, question: torch.Tensor, ratio: float):
    """Finch's own prefill of ``context + delimiter + question`` (a reserved id as the delimiter, as KVPress adds
    one); returns the press, its cache and the position the answer prefix starts at (keys re-rotated)."""
    from kvpress import FinchPress
    from transformers import DynamicCache

    press = FinchPress(ratio)
    press.delimiter_token_id = model.config.vocab_size - 1  # never drawn: ids are in [10, vocab - 10)
    delimiter = torch.full((1, 1), press.delimiter_token_id, device=ids.device)
    cache = DynamicCache()
    with torch.no_grad(), press(model):
        model.model(input_ids=torch.cat([ids, delimiter, question], dim=1), past_key_values=cache)
    return cache, cache.get_seq_length() if press.rerotate_keys else ids.shape[1] + question.shape[1]


def batched(model: Any, tokenizer: Any, ids: torch.Tensor, question: torch.Tensor, cells: list, max_new: int):
    """The grid's engine: answers, seconds, the batch size it picks and the decode's peak memory (GiB)."""
    from cachecraft_lib.grid.decode import CacheRow, decode_rows, default_batch_size
    from cachecraft_lib.methods.registry import REGISTRY, make_press
    from cachecraft_lib.models.pipeline import tokenwise_question
    from cachecraft_lib.models.prefill import SharedPrefill

    device = model.device
    start = clock(device)
    shared = SharedPrefill(model, ids)
    prefix = question[:, -4:]  # Finch's question is in its context; the answer prefix follows it
    rows = []
    for method, ratio in cells:
        if REGISTRY[method].needs_query_aware:
            cache, first = _finch_prefill(model, ids, question, ratio)
            row = CacheRow.from_cache(model, cache, prefix, first, max_new)
        else:
            row = CacheRow.from_cache(model, shared.cache_for(make_press(method, ratio)), question, ids.shape[1],
                                      max_new)
        row.tokenwise = tokenwise_question(method)  # bf16: the method's feed, as the grid's runner sets it
        rows.append(row)
    del shared
    size = default_batch_size(rows, device)
    compressed = clock(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    answers = decode_rows(model, tokenizer, rows, size)
    end = clock(device)
    peak = (torch.cuda.max_memory_allocated(device) - base) / 2**30 if device.type == "cuda" else None
    return answers, {"batched_s": end - start, "batched_prefill_and_compress_s": compressed - start,
                     "batched_decode_s": end - compressed, "batch_size": size, "rows": len(rows),
                     "decode_peak_gib": None if peak is None else round(peak, 2)}


def pipeline(model: Any, tokenizer: Any, ids: torch.Tensor, question: torch.Tensor, cells: list, max_new: int,
             budget_s: float) -> tuple[list[str], dict]:
    """KVPress's pipeline per cell until ``budget_s`` is spent (the rest of the cells then extrapolated)."""
    from kvpress import KVPressTextGenerationPipeline
    from transformers import DynamicCache

    from cachecraft_lib.methods.registry import REGISTRY, make_press
    from cachecraft_lib.models.pipeline import make_pipeline, tokenwise_question

    pipes = {tw: make_pipeline(model, tokenizer, tw) for tw in (False, True)}
    device, answers, seconds = model.device, [], []
    for method, ratio in cells:
        start = clock(device)
        with torch.no_grad():
            if REGISTRY[method].needs_query_aware:
                cache, first = _finch_prefill(model, ids, question, ratio)
                text = pipes[False].generate_answer(question[:, -4:], cache, first, max_new)
            else:
                press, cache = make_press(method, ratio), DynamicCache()
                with (press(model) if press is not None else _nothing()):
                    model.model(input_ids=ids, past_key_values=cache)
                pipe: KVPressTextGenerationPipeline = pipes[tokenwise_question(method)]
                text = pipe.generate_answer(question, cache, ids.shape[1], max_new)
        for layer in model.model.layers:
            layer.self_attn.masked_key_indices = None
        seconds.append(clock(device) - start)
        answers.append(text)
        if sum(seconds) > budget_s:
            break
    measured = sum(seconds)
    total = measured / len(seconds) * len(cells)
    return answers, {"pipeline_s": total, "pipeline_cells_measured": len(seconds),
                     "extrapolated": len(seconds) < len(cells), "pipeline_per_cell_s": measured / len(seconds)}


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def decode_comparison(model: Any, tokenizer: Any, ids: torch.Tensor, question: torch.Tensor, cells: list,
                      max_new: int, budget_s: float) -> dict:
    """Both ways on the same sample; the speed-up, and how many answers agree (bf16: rounding may differ)."""
    pipe_answers, pipe = pipeline(model, tokenizer, ids, question, cells, max_new, budget_s)
    grid_answers, grid = batched(model, tokenizer, ids, question, cells, max_new)
    same = sum(a == b for a, b in zip(grid_answers, pipe_answers, strict=False))
    return {**grid, **pipe, "cells": len(cells), "speedup": pipe["pipeline_s"] / grid["batched_s"],
            "same_answers": f"{same}/{len(pipe_answers)}", "max_new_tokens": max_new,
            "question_tokens": question.shape[1]}
