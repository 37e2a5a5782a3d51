"""The cascade keeps per stage sample only what candidates read: no tensor of the prefill's size survives."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
import torch

from cachecraft_lib.methods.features import layer_contexts
from cachecraft_lib.models.pipeline import TokenwiseQuestionPipeline
from cachecraft_lib.models.prefill import SharedPrefill
from cachecraft_lib.search.samples import StageSample, answer, build_sample


@pytest.fixture(scope="module")
def pipe(tiny_model):
    model, tokenizer = tiny_model
    return TokenwiseQuestionPipeline(model=model, tokenizer=tokenizer, device=model.device)


def _live_kv_tensors(length: int) -> list[torch.Tensor]:
    """Every live 4-D tensor with ``length`` positions: the shape of a layer's keys, values or attention."""
    gc.collect()
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance on deprecated torch objects warns
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor) and obj.dim() == 4 and obj.shape[2] == length:
                    found.append(obj)
            except Exception:  # objects that refuse inspection
                continue
    return found


def _tensors_in(sample: StageSample) -> list[torch.Tensor]:
    out = [v for v in vars(sample).values() if isinstance(v, torch.Tensor)]
    for ctx in sample.contexts:
        out += [v for v in vars(ctx).values() if isinstance(v, torch.Tensor)]
    return out


def test_a_sample_keeps_contexts_and_ids_only(tiny_model, tiny_rows, pipe):
    model, _ = tiny_model
    sample = build_sample(model, pipe, tiny_rows.iloc[0], 0.83)
    length = sample.context_length
    assert length > 500 and len(sample.contexts) == model.config.num_hidden_layers
    assert _live_kv_tensors(length) == []  # nothing of the prefill is left anywhere, not only in the sample
    assert {tuple(t.shape) for t in _tensors_in(sample)} == {(1, length), tuple(sample.question_ids.shape)}
    kept_bytes = sum(a.nbytes for ctx in sample.contexts for a in ctx.features.values())
    assert kept_bytes == 17 * length * 4 * model.config.num_hidden_layers  # 17 float32 arrays per layer
    held = SharedPrefill(model, sample.context_ids)  # what the cascade used to keep per sample: the probe sees it
    assert len(_live_kv_tensors(length)) >= 2 * model.config.num_hidden_layers
    del held


def test_contexts_and_answers_match_the_shared_prefill(tiny_model, tiny_rows, pipe):
    """Built inside the prefill and answered from a re-run prefill: the same as from a kept SharedPrefill."""
    from transformers import DynamicCache

    model, _ = tiny_model
    row = tiny_rows.iloc[1]
    sample = build_sample(model, pipe, row, 0.83)
    shared = SharedPrefill(model, sample.context_ids)
    reference = [ctx for _, ctx in layer_contexts(shared.layers, 0.83)]
    for ours, ref in zip(sample.contexts, reference, strict=True):
        assert ours.scalars() == ref.scalars()
        for name, array in ref.features.items():
            np.testing.assert_array_equal(ours.features[name], array)
    kept = [np.sort(np.argsort(-ctx.global_attn)[: ctx.K]) for ctx in sample.contexts]
    cache = DynamicCache()
    for (module, _, keys, values, _), idx in zip(shared.layers, kept, strict=True):
        t = torch.as_tensor(idx)
        cache.update(keys[:, :, t], values[:, :, t], module.layer_idx)
    with torch.no_grad():
        expected = pipe.generate_answer(sample.question_ids, cache, shared.context_length, int(row.max_new_tokens))
    assert answer(model, pipe, sample, kept) == expected
    with pytest.raises(ValueError, match="selections for"):
        answer(model, pipe, sample, kept[:-1])
