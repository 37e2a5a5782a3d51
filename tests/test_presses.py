"""Tail attention against transformers' eager attention, the 17 features, FRCPress == FRC program, registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from cachecraft_lib.grid.cells import grid_methods
from cachecraft_lib.methods.features import FEATURES, build_context, tail_attention
from cachecraft_lib.methods.programs import FRC_PROGRAM, V1_PROGRAM
from cachecraft_lib.methods.registry import FRCPress, PolicyPress, make_press


class Capture(FRCPress):
    """Records what a press sees in each layer (inputs of ``compress``)."""

    seen: list = []

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        self.seen.append((module, hidden_states, keys, values, kwargs))
        return keys, values


def random_llama(heads: int, kv_heads: int, seed: int = 0) -> LlamaForCausalLM:
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=64 // heads,
                      attn_implementation="eager")
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("heads,kv_heads,length", [(4, 4, 50), (4, 2, 90), (8, 2, 130), (8, 1, 40)])
def test_tail_attention_equals_eager_attention_rows(heads, kv_heads, length):
    model = random_llama(heads, kv_heads)
    ids = torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        eager = model(ids, output_attentions=True).attentions  # per layer (1, H, L, L)
        press = Capture(compression_ratio=0.5)
        press.seen = []
        with press(model):
            model.model(input_ids=ids)
    for layer, (module, hidden, keys, _, kwargs) in enumerate(press.seen):
        ours = tail_attention(module, hidden, keys, kwargs["position_embeddings"], n_queries=64)
        q = min(64, length)
        ref = eager[layer][0, :, -q:, :].view(kv_heads, heads // kv_heads, q, length).mean(1)
        assert torch.allclose(ours, ref.float(), atol=1e-5), layer


def _layer_inputs(model, ids):
    press = Capture(compression_ratio=0.5)
    press.seen = []
    with torch.no_grad(), press(model):
        model.model(input_ids=ids)
    return press.seen


def test_seventeen_features_are_well_formed():
    model = random_llama(8, 4)
    ids = torch.randint(0, 64, (1, 117), generator=torch.Generator().manual_seed(1))
    module, hidden, keys, values, kwargs = _layer_inputs(model, ids)[1]
    attn = tail_attention(module, hidden, keys, kwargs["position_embeddings"])
    ctx = build_context(attn, keys, values, 0.75, layer=1)
    assert tuple(ctx.features) == FEATURES and len(FEATURES) == 17
    assert ctx.scalars() == {"L": 117, "K": 29, "H": 4, "Q": 64, "layer": 1}
    for name, arr in ctx.features.items():
        assert arr.shape == (117,) and arr.dtype == np.float32 and np.isfinite(arr).all(), name
        assert not arr.flags.writeable  # policies cannot change their inputs
    assert ctx.sink_mask.sum() == 4 and ctx.recent_mask.sum() == 32 and ctx.recent_mask[-1] == 1
    assert ctx.rel_position[0] == 0 and ctx.rel_position[-1] == 1 and ctx.position[-1] == 116
    assert 0 <= ctx.chunk_rank.min() and ctx.chunk_rank.max() == 1
    assert ((ctx.head_consistency >= 0) & (ctx.head_consistency <= 1)).all()
    assert ctx.head_consistency.sum() == pytest.approx(29, rel=1e-5)  # each head contributes its top-K, / H
    assert (ctx.head_concentration >= 0.25 - 1e-6).all() and (ctx.head_concentration <= 1 + 1e-6).all()
    assert ctx.global_attn.sum() == pytest.approx(1.0, rel=1e-4)  # attention rows sum to one
    assert ctx.key_change[0] == 0 and (ctx.key_norm > 0).all()
    with pytest.raises(AttributeError, match="features:"):
        _ = ctx.no_such_feature


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.88])
def test_frc_press_and_frc_program_keep_identical_indices(tiny_model, tiny_rows, ratio):
    model, tok = tiny_model
    for row in tiny_rows.itertuples():
        ids = tok.encode(tok.bos_token + row.context, add_special_tokens=False, return_tensors="pt")
        a, b = FRCPress(ratio, record=True), PolicyPress(FRC_PROGRAM, ratio, record=True)
        for press in (a, b):
            with torch.no_grad(), press(model):
                model.model(input_ids=ids)
        assert a.kept.keys() == b.kept.keys() == set(range(model.config.num_hidden_layers))
        for layer in a.kept:
            assert torch.equal(a.kept[layer], b.kept[layer]), (row.task, layer)
            n_chunks = -(-ids.shape[1] // 20)
            assert len(set((a.kept[layer] // 20).tolist())) == max(1, int(n_chunks * (1 - ratio)))


def test_v1_program_keeps_exactly_k_tokens(tiny_model, tiny_rows):
    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    ids = tok.encode(tok.bos_token + row.context, add_special_tokens=False, return_tensors="pt")
    press = PolicyPress(V1_PROGRAM, 0.88, record=True)
    with torch.no_grad(), press(model):
        model.model(input_ids=ids)
    assert all(len(k) == max(1, int(ids.shape[1] * 0.12)) for k in press.kept.values())


def test_policy_press_rejects_a_hacked_program(tiny_model, tiny_rows):
    from cachecraft_lib.methods.policy import SelectionError

    model, tok = tiny_model
    hack = FRC_PROGRAM.read_text().replace("return topk_chunks(scores, ctx)", "return list(range(ctx.L))")
    ids = tok.encode(tok.bos_token + tiny_rows.iloc[0].context, add_special_tokens=False, return_tensors="pt")
    with pytest.raises(SelectionError, match="'size'"), torch.no_grad(), PolicyPress(hack, 0.5)(model):
        model.model(input_ids=ids)


@pytest.mark.slow
def test_every_registry_name_answers_on_the_embedded_model(tiny_answerer, tiny_rows):
    row = tiny_rows.iloc[0]
    for name in grid_methods():
        out = tiny_answerer.answer(name, 0.75, row.context, row.question, row.answer_prefix, 12)
        assert isinstance(out, str), name  # may be empty: a trained model can stop at once when compressed


@pytest.mark.slow
def test_tokenwise_pipeline_matches_the_stock_pipeline(tiny_model, tiny_rows):
    """Same answers wherever the stock pipeline works; ChunkKV breaks it on CPU when a layer keeps a short chunk
    (FRC masks its spare slots instead, so it must answer in both)."""
    from cachecraft_lib.models.pipeline import make_pipeline

    model, tok = tiny_model
    stock, tokenwise = make_pipeline(model, tok), make_pipeline(model, tok, tokenwise=True)
    compared = 0
    for name in ("no_press", "snapkv", "streaming_llm", "knorm", "tova", "frc", "chunkkv"):
        for ratio in (0.5, 0.88):
            for row in tiny_rows.itertuples():
                kwargs = dict(question=row.question, answer_prefix=row.answer_prefix, max_new_tokens=16)
                try:
                    a = stock(row.context, press=make_press(name, ratio), **kwargs)["answer"]
                except RuntimeError as err:  # layer-varying cache: the sdpa mask of a multi-token forward
                    assert name == "chunkkv" and "must match the size" in str(err)
                    continue
                b = tokenwise(row.context, press=make_press(name, ratio), **kwargs)["answer"]
                assert a == b, (name, ratio, row.task)
                compared += 1
    assert compared >= 5 * 2 * len(tiny_rows)


def test_make_press_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown method"):
        make_press("frcc", 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        make_press("frc", 1.2)


def test_policy_press_accepts_a_policy_object(tiny_model, tiny_rows):
    from cachecraft_lib.methods.policy import topk_tokens

    class Recent:
        """Keep the K most recent tokens (a policy as a plain object)."""

        def score_tokens(self, ctx):
            return ctx.position

        def select_tokens_to_keep(self, scores, ctx):
            return topk_tokens(scores, ctx)

    model, tok = tiny_model
    ids = tok.encode(tok.bos_token + tiny_rows.iloc[0].context, add_special_tokens=False, return_tensors="pt")
    press = PolicyPress(Recent(), 0.75, record=True)
    with torch.no_grad(), press(model):
        model.model(input_ids=ids)
    length, k = ids.shape[1], max(1, int(ids.shape[1] * 0.25))
    assert all(kept.tolist() == list(range(length - k, length)) for kept in press.kept.values())
