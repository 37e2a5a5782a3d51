"""The capped decode harness: the cap holds on the cache tensors at every forward, for every baseline, and
eviction plus positions are exactly "attention restricted to the kept entries, at the true positions"."""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib.decoding.capped import CapMethod, CappedGenerator, cap_method, ratio_keeping
from cachecraft_lib.methods.registry import REGISTRY

CAP = 96


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 400, (1, n), generator=torch.Generator().manual_seed(seed))


class _CacheWatch:
    """An independent hook that reads every layer's cache tensors after each attention forward."""

    def __init__(self, model) -> None:
        self.lengths: list[tuple[int, int, int]] = []  # (layer, keys length, values length)
        self.hooks = [layer.self_attn.register_forward_hook(self._hook, with_kwargs=True)
                      for layer in model.model.layers]

    def _hook(self, module, args, kwargs, output) -> None:
        layer = kwargs["past_key_values"].layers[module.layer_idx]
        self.lengths.append((module.layer_idx, layer.keys.shape[2], layer.values.shape[2]))

    def close(self) -> None:
        for h in self.hooks:
            h.remove()


@pytest.mark.parametrize("name", [n for n, m in REGISTRY.items() if m.decode_time and n != "no_press"])
def test_cap_never_exceeded_at_any_step(tiny_model, name):
    model, _ = tiny_model
    watch = _CacheWatch(model)
    try:
        gen = CappedGenerator(model, cap_method(name), cap=CAP, chunk=40)
        gen.feed(_ids(230))  # context in chunks: 40 > cap - ... forces eviction every chunk after the first two
        state = gen.snapshot()
        for seed in (1, 2):  # two questions from the same streamed state
            gen.restore(state)
            gen.generate(_ids(12, seed), max_new_tokens=30, stop=set())
    finally:
        watch.close()
    steps_per_layer = len(watch.lengths) // model.config.num_hidden_layers
    assert steps_per_layer > 60  # context pieces + 2 x (question + 29 decode steps)
    assert max(k for _, k, _ in watch.lengths) == CAP  # it fills the cap ...
    assert all(k <= CAP and v <= CAP for _, k, v in watch.lengths)  # ... and never exceeds it
    assert gen.max_cache_lengths() == [CAP] * model.config.num_hidden_layers


def test_full_cache_grows_and_a_large_cap_changes_nothing(tiny_model):
    model, _ = tiny_model
    ids, question = _ids(150), _ids(10, 3)
    full = CappedGenerator(model, cap_method("no_press"), cap=None, chunk=40)
    roomy = CappedGenerator(model, cap_method("h2o"), cap=400, chunk=40)
    assert full.generate(ids, 8, set()) == roomy.generate(ids, 8, set())
    assert full.max_cache_lengths() == [157] * model.config.num_hidden_layers
    with torch.no_grad():
        ref = model(input_ids=torch.cat([ids, question], 1)).logits[0, -1]
    full.reset()
    full.feed(ids)
    assert torch.allclose(full.feed(question), ref, atol=1e-4)


def _streaming_reference_mask(n: int, chunk: int, cap: int, sinks: int = 4) -> torch.Tensor:
    """Which earlier tokens each token may see when StreamingLLM evicts before every chunk under ``cap``."""
    visible = torch.zeros(n, n, dtype=torch.bool)
    kept: list[int] = []
    step = min(chunk, cap // 2)
    for start in range(0, n, step):
        piece = list(range(start, min(start + step, n)))
        if len(kept) + len(piece) > cap:
            keep = cap - len(piece)
            kept = kept[:sinks] + kept[len(kept) - (keep - sinks):]
        for p in piece:
            visible[p, kept] = True
            visible[p, piece[0]: p + 1] = True
        kept = kept + piece
    return visible


def test_eviction_and_positions_equal_masked_full_attention(tiny_model):
    """StreamingLLM under the cap == the full model attending only to what was kept, at true positions.

    The reference runs all tokens in one forward with a 4-D mask built independently of the harness; it
    differs if eviction gathered the wrong entries or if positions followed the (shorter) cache length."""
    model, _ = tiny_model
    n, chunk, cap = 200, 30, 64
    ids = _ids(n, 5)
    gen = CappedGenerator(model, cap_method("streaming_llm"), cap=cap, chunk=chunk)
    capped = gen.feed(ids)
    mask = _streaming_reference_mask(n, chunk, cap)
    bias = torch.zeros(1, 1, n, n).masked_fill(~mask, float("-inf"))
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=bias).logits[0, -1]
        unmasked = model(input_ids=ids).logits[0, -1]
    assert torch.allclose(capped, ref, atol=1e-4), (capped - ref).abs().max()
    assert not torch.allclose(capped, unmasked, atol=1e-2)  # eviction did change the answer's logits
    assert gen.position == n

    # the same eviction with positions taken from the cache length (the classic mistake) does not match
    wrong = CappedGenerator(model, cap_method("streaming_llm"), cap=cap, chunk=chunk)
    logits = None
    for start in range(0, n, wrong.piece_size()):
        wrong.position = wrong.cache.get_seq_length()
        logits = wrong._forward(ids[:, start:start + wrong.piece_size()])
    assert not torch.allclose(logits, ref, atol=1e-2)


def test_recorded_window_queries_carry_their_own_positions(tiny_model):
    """The hook keeps each recent token's rotary (cos, sin) at its own position, across single-token steps."""
    model, _ = tiny_model
    gen = CappedGenerator(model, CapMethod("rkv", cap_method("rkv").press, window=8), cap=None, chunk=16)
    gen.generate(_ids(20), max_new_tokens=5, stop=set())  # 20 fed in 2 pieces, then 4 single-token steps
    positions = torch.arange(gen.position - 8, gen.position)[None]
    cos, sin = model.model.rotary_emb(torch.zeros(1, 8, 1), positions)
    record = gen.records[0]
    assert record.hidden.shape[1] == 8
    assert torch.allclose(record.cos, cos) and torch.allclose(record.sin, sin)


def test_ratio_keeping_matches_kvpress_rounding():
    from kvpress.utils import compute_n_kept

    for k_len in range(9, 400, 7):
        for n_keep in (1, 5, k_len // 2, k_len - 1):
            assert compute_n_kept(k_len, ratio_keeping(k_len, n_keep)) == n_keep


def test_cap_too_small_is_refused_with_advice(tiny_model):
    with pytest.raises(ValueError, match="at least"):
        CappedGenerator(tiny_model[0], cap_method("rkv"), cap=10)
    with pytest.raises(ValueError, match="unknown method"):
        cap_method("h3o")


# ------------------------------------------------------------------ the streaming board
def test_streamed_full_cache_answers_as_kvpress_pipeline(tiny_model, tiny_rows):
    """Without a cap, streaming the context in chunks answers exactly as KVPress's pipeline (one prefill)."""
    from cachecraft_lib.decoding.streaming import stream_answers
    from cachecraft_lib.models.pipeline import make_pipeline

    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    res = stream_answers(model, tok, row.context, [row.question], row.answer_prefix, "no_press", None,
                         int(row.max_new_tokens))
    stock = make_pipeline(model, tok)(row.context, question=row.question, answer_prefix=row.answer_prefix,
                                      press=None, max_new_tokens=int(row.max_new_tokens))["answer"]
    assert res.answers == [stock]
    assert res.cap is None and max(res.max_cache) > res.context_tokens


def test_streamed_under_a_cap_holds_it_and_answers_each_question_from_the_same_state(tiny_model, tiny_rows):
    from cachecraft_lib.decoding.streaming import stream_answers

    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    other = "What is the first word of the text?"
    both = stream_answers(model, tok, row.context, [row.question, other], row.answer_prefix, "h2o", 0.5, 12)
    alone = stream_answers(model, tok, row.context, [other], row.answer_prefix, "h2o", 0.5, 12)
    assert both.cap == round(0.5 * both.context_tokens)
    assert max(both.max_cache) == both.cap  # streamed at the cap, never above it
    assert both.answers[1] == alone.answers[0]  # the second question did not see the first's tokens
    with pytest.raises(ValueError, match="cap_fraction"):
        stream_answers(model, tok, row.context, [other], "", "h2o", 1.5, 4)


def test_board_table_shares_and_intervals():
    import pandas as pd

    from cachecraft_lib.decoding.streaming import BOARD_LABEL, board_table

    rows = []
    for task in ("a", "b"):
        for i, full in enumerate((100.0, 80.0, 60.0)):
            rows.append({"model": "m", "length": 1, "task": task, "index": i, "cell": "no_press", "score": full})
            rows.append({"model": "m", "length": 1, "task": task, "index": i, "cell": "x@0.5", "score": full / 2})
    table = board_table(pd.DataFrame(rows)).set_index("method")
    assert table.loc["x", "share of full"].startswith("0.50 [0.50, 0.50]")  # exactly half on every resample
    assert table.loc["x", "minus full"].startswith("-40.0 [")
    assert table.loc["x", "below the full cache?"] == "reproduced"
    assert table.attrs["label"] == BOARD_LABEL
