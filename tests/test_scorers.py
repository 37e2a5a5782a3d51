"""FRC as KVPress-native presses: KVPress's wrappers take its scorer, the stock pipeline answers with it."""

from __future__ import annotations

import pytest
import torch
from kvpress import (
    AdaKVPress,
    ChunkKVPress,
    DecodingPress,
    KeyRerotationPress,
    KVPressTextGenerationPipeline,
)
from transformers import DynamicCache

from cachecraft_lib.methods.programs import FRC_PROGRAM
from cachecraft_lib.methods.scorers import FRCPress, FRCScorerPress, PolicyScorerPress, WholeChunkPress
from cachecraft_lib.models.pipeline import make_pipeline
from cachecraft_lib.models.prefill import SharedPrefill

pytestmark = pytest.mark.slow


def _shared(model, tok, row):
    ids = tok.encode(tok.bos_token + row.context, add_special_tokens=False, return_tensors="pt")
    return SharedPrefill(model, ids)


def _lengths(cache):
    return [cache.get_seq_length(i) for i in range(len(cache))]


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.88])
def test_kvpress_chunkkv_over_the_frc_scorer_keeps_frcs_tokens(tiny_model, tiny_rows, ratio):
    model, tok = tiny_model
    for row in tiny_rows.itertuples():
        shared = _shared(model, tok, row)
        ours = shared.cache_for(FRCPress(ratio))
        kvpress = shared.cache_for(ChunkKVPress(FRCScorerPress(ratio), chunk_length=20))
        program = shared.cache_for(WholeChunkPress(PolicyScorerPress(policy=FRC_PROGRAM, compression_ratio=ratio)))
        for a, b, c in zip(ours.layers, kvpress.layers, program.layers, strict=True):
            n = b.keys.shape[2]  # ours continues with masked spare slots where the short chunk is kept
            assert torch.equal(a.keys[:, :, :n], b.keys) and torch.equal(a.values[:, :, :n], b.values)
            assert torch.equal(a.keys, c.keys)  # the FRC program's scores, chunked the same way


def test_every_layer_gets_the_same_slots_and_spare_ones_are_masked(tiny_model, tiny_rows):
    model, tok = tiny_model
    masked_layers = 0
    for row in tiny_rows.itertuples():
        shared = _shared(model, tok, row)
        assert shared.context_length % 20  # the short last chunk exists
        press = FRCPress(0.88, record=True)
        cache = shared.cache_for(press)
        assert len(set(_lengths(cache))) == 1  # even layers: the stock pipeline's one mask fits all
        for layer, attn in enumerate(_attention_modules(model)):
            spare = cache.get_seq_length(layer) - len(press.kept[layer])
            masks = attn.masked_key_indices
            assert (masks is None) == (spare == 0)
            masked_layers += masks is not None
    assert masked_layers  # the paper's rule keeps the short chunk in some layers on these rows


def _attention_modules(model):
    return [layer.self_attn for layer in model.model.layers]


def test_kvpress_stock_pipeline_answers_with_frc_under_sdpa(tiny_model, tiny_rows):
    model, tok = tiny_model
    assert model.config._attn_implementation == "sdpa"
    pipe = KVPressTextGenerationPipeline(model=model, tokenizer=tok, device=model.device)
    tokenwise = make_pipeline(model, tok, tokenwise=True)
    for row in tiny_rows.itertuples():
        kwargs = dict(question=row.question, answer_prefix=row.answer_prefix, max_new_tokens=8)
        answer = pipe(row.context, press=FRCPress(0.88), **kwargs)["answer"]  # the paper's rule (the default)
        assert answer == tokenwise(row.context, press=FRCPress(0.88), **kwargs)["answer"]


@pytest.mark.parametrize("wrap", [
    lambda: AdaKVPress(FRCScorerPress(0.5)),
    lambda: KeyRerotationPress(FRCScorerPress(0.5)),
    lambda: ChunkKVPress(FRCScorerPress(0.5), chunk_length=20),
    lambda: WholeChunkPress(PolicyScorerPress(policy=FRC_PROGRAM, compression_ratio=0.5)),
], ids=["adakv", "key_rerotation", "chunkkv", "policy_scorer"])
def test_kvpress_wrappers_take_the_frc_scorer(tiny_model, tiny_rows, wrap):
    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    out = make_pipeline(model, tok, tokenwise=True)(row.context, question=row.question, press=wrap(),
                                                      answer_prefix=row.answer_prefix, max_new_tokens=6)
    assert isinstance(out["answer"], str)


def test_decoding_press_compresses_with_the_frc_scorer(tiny_model, tiny_rows):
    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    press = DecodingPress(FRCScorerPress(), compression_interval=8, target_size=96, hidden_states_buffer_size=16)
    ids = tok.encode(tok.bos_token + row.context[:600], add_special_tokens=False, return_tensors="pt")
    cache = DynamicCache()
    with torch.no_grad():
        model.model(input_ids=ids, past_key_values=cache)  # prefill (not compressed by a decoding press)
        token = ids[:, -1:]
        with press(model):
            for step in range(24):
                position = torch.tensor([[ids.shape[1] + step]])
                out = model(input_ids=token, past_key_values=cache, position_ids=position)
                token = out.logits[:, -1:].argmax(-1)
    assert max(_lengths(cache)) <= 96 + 8  # trimmed to the target every 8 steps


def test_below_one_chunk_is_compressed_tokenwise(tiny_model):
    model, tok = tiny_model
    shared = SharedPrefill(model, torch.tensor([[1] + list(range(40, 54))]))  # 15 tokens < one chunk
    cache = shared.cache_for(FRCPress(0.2))
    assert _lengths(cache) == [12] * len(cache)  # max(1, int(15 * 0.8)), as KVPress's scorers keep


def test_each_batch_row_gets_its_own_selection(tiny_model, tiny_rows):
    model, tok = tiny_model
    rows = [tok.encode(tok.bos_token + r.context, add_special_tokens=False) for r in tiny_rows.itertuples()]
    n = min(len(r) for r in rows[:2])
    batch = torch.tensor([rows[0][:n], rows[1][:n]])
    alone = [SharedPrefill(model, batch[b:b + 1]).cache_for(FRCPress(0.75)) for b in range(2)]
    together = SharedPrefill(model, batch).cache_for(FRCPress(0.75))
    differ = 0
    for layer, joint in enumerate(together.layers):
        for b in range(2):
            assert torch.allclose(joint.keys[b], alone[b].layers[layer].keys[0], atol=1e-4), (layer, b)
        differ += not torch.equal(alone[0].layers[layer].keys[0], alone[1].layers[layer].keys[0])
    assert differ  # the two rows keep different tokens: a shared selection would fail the check above
