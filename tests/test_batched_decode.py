"""Batched decoding gives the answers of decoding each cell alone through KVPress's pipeline."""

from __future__ import annotations

import pytest

from cachecraft_lib.grid import Cell, answer_one
from cachecraft_lib.grid.cells import grid_methods
from cachecraft_lib.grid.decode import CacheRow, decode_rows
from cachecraft_lib.grid.runner import own_prefill_row
from cachecraft_lib.methods.registry import REGISTRY, make_press
from cachecraft_lib.models.pipeline import Answerer
from cachecraft_lib.models.prefill import SharedPrefill
from cachecraft_lib.profiles import EMBEDDED_MODEL

pytestmark = pytest.mark.slow
SINGLE_PASS = [m for m in grid_methods() if not REGISTRY[m].needs_query_aware]


def _prefill(answerer, row):
    ids = answerer.pipe(False).preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**9)
    return SharedPrefill(answerer.model, ids["context_ids"]), ids["questions_ids"][0]


def _row(model, shared, method, ratio, question_ids, max_new):
    cache = shared.cache_for(make_press(method, ratio))
    return CacheRow.from_cache(model, cache, question_ids, shared.context_length, max_new)


def test_batched_equals_one_at_a_time_for_every_single_pass_method(tiny_model, tiny_rows):
    model, tok = tiny_model
    answerer = Answerer(model, tok)
    cells = [("no_press", 0.0)] + [(m, r) for m in SINGLE_PASS if m != "no_press" for r in (0.5, 0.88)]
    for row in tiny_rows.iloc[:2].itertuples():
        shared, q = _prefill(answerer, row)
        alone = [answer_one(answerer, shared, Cell(EMBEDDED_MODEL, 1024, m, r), q, 24) for m, r in cells]
        rows = [_row(model, shared, m, r, q, 24) for m, r in cells]
        batched = decode_rows(model, tok, rows)
        differ = [(c, a, b) for c, a, b in zip(cells, alone, batched, strict=True) if a != b]
        assert not differ, differ


def test_a_batch_mixes_cache_lengths_per_row_and_per_layer(tiny_model, tiny_rows):
    model, tok = tiny_model
    answerer = Answerer(model, tok)
    row = tiny_rows.iloc[0]
    shared, q = _prefill(answerer, row)
    specs = [("no_press", 0.0), ("pyramidkv", 0.75), ("snapkv", 0.88), ("adasnapkv", 0.5), ("frc", 0.88)]
    rows = [_row(model, shared, m, r, q, 16) for m, r in specs]
    lengths = [[k.shape[2] for k in r.keys] for r in rows]
    assert len({tuple(x) for x in lengths}) >= 4  # rows of different cache lengths (AdaKV keeps all, masked)
    frc_masked = [m is not None for m in rows[4].masked]  # FRC 0.88: the short last chunk is kept in some layers
    assert any(frc_masked) and not all(frc_masked)  # only: their spare slots are masked, as AdaKV masks
    assert any(m is not None for m in rows[3].masked)  # AdaKV: head-wise masks
    alone = [decode_rows(model, tok, [r])[0] for r in rows]
    assert decode_rows(model, tok, rows) == alone
    assert decode_rows(model, tok, rows, batch_size=2) == alone


def test_a_row_that_stops_early_does_not_change_the_others(tiny_model, tiny_rows):
    model, tok = tiny_model
    answerer = Answerer(model, tok)
    row = tiny_rows.iloc[0]
    shared, q = _prefill(answerer, row)
    long_row = _row(model, shared, "streaming_llm", 0.88, q, 40)
    short_row = _row(model, shared, "no_press", 0.0, q, 40)
    capped = _row(model, shared, "snapkv", 0.5, q, 2)  # stops at max_new_tokens = 2
    long_alone, short_alone = (decode_rows(model, tok, [r])[0] for r in (long_row, short_row))
    answers = decode_rows(model, tok, [capped, long_row, short_row])
    assert answers[1:] == [long_alone, short_alone]
    assert len(tok.encode(answers[0], add_special_tokens=False)) <= 2
    # the rows stop at different points, and the earlier one at its eos (below its cap of 40 tokens), so the
    # batch kept decoding the other row after this one had finished
    lengths = sorted(len(tok.encode(a, add_special_tokens=False)) for a in (long_alone, short_alone))
    assert lengths[0] < lengths[1] and lengths[0] < 40 - 1


def test_finch_prefills_on_its_own_and_joins_the_batch(tiny_answerer, tiny_rows):
    answerer = tiny_answerer
    model, tok = answerer.model, answerer.tokenizer
    row = tiny_rows.iloc[0]
    cell = Cell(EMBEDDED_MODEL, 1024, "finch", 0.5)
    expected = answerer.answer("finch", 0.5, row.context, row.question, row.answer_prefix, 12)
    finch = own_prefill_row(answerer, cell, row.context, row.question, row.answer_prefix, 12)
    shared, q = _prefill(answerer, row)
    other = _row(model, shared, "snapkv", 0.5, q, 12)
    assert finch.start < shared.context_length  # re-rotated keys continue from the compressed length
    assert decode_rows(model, tok, [other, finch])[1] == expected


def test_decode_by_width_loops_rows_of_similar_width_and_keeps_the_order(monkeypatch):
    """Rows within WIDTH_SLACK of a loop's narrowest share a loop (contexts differ by a few tokens), wider ones start
    another, a loop holds at most batch_size rows, and each answer returns to its row's place."""
    import torch

    from cachecraft_lib.grid import decode as dec

    def row(width: int) -> dec.CacheRow:
        kv = [torch.zeros(1, 1, width, 2)]
        return dec.CacheRow(kv, kv, [None], torch.zeros(1, 1, dtype=torch.long), width, 1)

    loops = []

    def fake(model, tokenizer, rows, batch_size=None, tokenwise_question=False):
        loops.append(([r.start for r in rows], batch_size))
        return [f"w{r.start}" for r in rows]

    monkeypatch.setattr(dec, "decode_rows", fake)
    widths = [204, 100, 104, 110, 200, 300]
    assert dec.decode_by_width(None, None, [row(w) for w in widths], 2) == [f"w{w}" for w in widths]
    assert [members for members, _ in loops] == [[100, 104], [110], [200, 204], [300]]
    assert {size for _, size in loops} == {2}  # the caller's batch size (None: decode_rows sizes it by memory)
