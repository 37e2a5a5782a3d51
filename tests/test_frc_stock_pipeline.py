"""FRCPress is the paper's rule and runs in KVPress's stock pipeline under sdpa.

The kept indices are pinned to an independent NumPy reading of the paper's equations (local, density, max-head
from eager attention, chunks of 20, top n_keep), inside ``pipeline("kv-press-text-generation")``; the cache's
unmasked slots must hold exactly those tokens and the answer must be the token-by-token pipeline's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import DynamicCache, pipeline

from cachecraft_lib.methods.programs import FRC_PROGRAM
from cachecraft_lib.methods.registry import make_press
from cachecraft_lib.methods.scorers import FRCPress, FRCScorerPress, PolicyScorerPress, WholeChunkPress
from cachecraft_lib.models.pipeline import make_pipeline
from cachecraft_lib.models.prefill import SharedPrefill


def paper_kept(tail: np.ndarray, groups: int, ratio: float) -> np.ndarray:
    """The paper's kept set from one layer's tail attention (H, Q, L), written from its equations."""
    heads, _, length = tail.shape
    a = tail.reshape(heads // groups, groups, *tail.shape[1:]).mean(1)  # A~[g, q, t]
    local, abar = a[:, -32:, :].mean((0, 1)), a.mean((0, 1))
    wd = max(3, min(33, 2 * (length // 64) + 1))
    padded = np.concatenate([np.zeros(wd // 2), abar, np.zeros(wd // 2)])
    density = np.array([padded[t:t + wd].sum() / wd for t in range(length)])
    maxhead = a.mean(1).max(0)
    s = sum(w * f / np.abs(f).max() for w, f in ((0.55, local), (0.30, density), (0.15, maxhead)))
    n_chunks = math.ceil(length / 20)
    means = np.array([s[c * 20:(c + 1) * 20].mean() for c in range(n_chunks)])
    n_keep = max(1, math.floor(n_chunks * (1 - ratio)))
    top = sorted(np.argsort(-means, kind="stable")[:n_keep])
    return np.array([t for c in top for t in range(c * 20, min(length, (c + 1) * 20))])


def eager_tails(model, ids: torch.Tensor, n_queries: int = 64) -> list[np.ndarray]:
    """Each layer's attention rows of the last ``n_queries`` prompt positions, from transformers' eager path."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model.model(input_ids=ids, output_attentions=True)
    finally:
        model.set_attn_implementation(before)
    return [att[0, :, -n_queries:, :].double().numpy() for att in out.attentions]


def test_frc_defaults_are_the_papers_rule_in_the_registry_and_the_class():
    press = FRCPress(0.88)
    assert press.keep_last is False and press.chunk_length == 20 and press.weights == (0.55, 0.30, 0.15)
    assert repr(make_press("frc", 0.88)) == repr(press)  # the registry's frc is the quick start's FRCPress


def test_spare_slots_hold_evicted_tokens_and_are_masked():
    """A layer that keeps the short last chunk: the kept tokens first, then masked evicted ones up to the slots."""
    from cachecraft_lib.methods.frc import chunk_slots
    from cachecraft_lib.methods.scorers import filler_mask, pad_to_slots

    length, ratio = 45, 0.5  # 3 chunks (20, 20, 5), n_keep 1: 20 slots
    assert chunk_slots(length, ratio) == 20
    kept = torch.arange(40, 45)  # the short chunk ranked first
    idx, real = pad_to_slots([kept, torch.arange(0, 20)], 20, length)
    assert real == [5, 20] and idx[0, :5].tolist() == kept.tolist()
    assert not set(idx[0, 5:].tolist()) & set(kept.tolist()) and len(set(idx[0].tolist())) == 20
    batch, head, slot = filler_mask(real, 20, heads=2)
    assert set(batch.tolist()) == {0} and sorted(set(zip(head.tolist(), slot.tolist(), strict=True))) == [
        (h, s) for h in range(2) for s in range(5, 20)]
    assert filler_mask([20, 20], 20, heads=2) is None


@pytest.mark.slow
@pytest.mark.parametrize("ratio", [0.5, 0.88])
def test_stock_pipeline_keeps_the_papers_indices(tiny_model, tiny_rows, ratio):
    """The matrix: paper's rule x ratios 0.5, 0.88 x three tasks in the stock pipeline (6 of 6 answer)."""
    model, tok = tiny_model
    assert model.config._attn_implementation == "sdpa"
    stock = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device=model.device)
    tokenwise = make_pipeline(model, tok, tokenwise=True)
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    masked_layers = 0
    for row in tiny_rows.itertuples():
        kwargs = dict(question=row.question, answer_prefix=row.answer_prefix, max_new_tokens=8)
        press, cache = FRCPress(ratio, record=True), DynamicCache()
        answer = stock(row.context, press=press, cache=cache, **kwargs)["answer"]
        masks = [layer.self_attn.masked_key_indices for layer in model.model.layers]  # before any other prefill
        assert answer == tokenwise(row.context, press=FRCPress(ratio), **kwargs)["answer"], row.task
        ids = stock.preprocess(row.context, [row.question], row.answer_prefix, 1 << 30)["context_ids"]
        full = SharedPrefill(model, ids).layers
        for layer, tail in enumerate(eager_tails(model, ids)):
            expected = paper_kept(tail, groups, ratio)
            assert press.kept[layer].tolist() == expected.tolist(), (row.task, layer)
            keys = full[layer][2][0]  # (H_kv, L, D) before compression
            slots = cache.layers[layer].keys[0]
            masked = masks[layer]
            n = len(expected)
            masked_layers += masked is not None
            if masked is not None:  # the spare slots, every head, nothing else
                assert set(masked[2].tolist()) == set(range(n, slots.shape[1]))
            else:
                assert slots.shape[1] == n
            torch.testing.assert_close(slots[:, :n], keys[:, torch.as_tensor(expected)], rtol=0, atol=0)
    assert masked_layers  # the short last chunk was kept in some layers: the masked path ran


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda r: WholeChunkPress(FRCScorerPress(r)),
    lambda r: WholeChunkPress(PolicyScorerPress(policy=FRC_PROGRAM, compression_ratio=r)),
], ids=["frc_scorer", "frc_program"])
def test_whole_chunk_wrappers_answer_in_the_stock_pipeline(tiny_model, tiny_rows, make):
    """Any scorer in whole chunks (the paper's rule) answers as FRCPress does, in the stock pipeline."""
    model, tok = tiny_model
    stock = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device=model.device)
    row = tiny_rows.iloc[0]
    kwargs = dict(question=row.question, answer_prefix=row.answer_prefix, max_new_tokens=8)
    for ratio in (0.5, 0.88):
        assert stock(row.context, press=make(ratio), **kwargs)["answer"] == \
            stock(row.context, press=FRCPress(ratio), **kwargs)["answer"]
