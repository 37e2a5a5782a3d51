"""bf16: the token-by-token and the batched question feeds agree in float32, and can differ in bfloat16.

Measured on the embedded model (1024 tokens, niah_single_1 / vt / qa_1 / cwe): in float32 the same answers
and a largest last-logit difference of 1.2e-5; in bfloat16 the differences reach 0.125 and vt's first answer
token flips (3 of 4 answers the same). What holds, and is pinned here: float32 agrees; bfloat16 differs by
rounding only (small logit differences) and each feed is deterministic, so a grid that picks the feed by
method gives the same answer every run.
"""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib.pipeline import TokenwiseQuestionPipeline


def _last_logits(model, context_ids, question_ids, tokenwise: bool) -> torch.Tensor:
    from transformers import DynamicCache

    cache, length = DynamicCache(), context_ids.shape[1]
    with torch.no_grad():
        model.model(input_ids=context_ids, past_key_values=cache)
        if not tokenwise:
            pos = torch.arange(length, length + question_ids.shape[1])[None]
            return model(input_ids=question_ids, past_key_values=cache, position_ids=pos).logits[0, -1].float()
        for i in range(question_ids.shape[1]):
            out = model(input_ids=question_ids[:, i:i + 1], past_key_values=cache,
                        position_ids=torch.tensor([[length + i]]))
    return out.logits[0, -1].float()


@pytest.fixture(scope="module")
def feeds(tiny_model, tiny_rows):
    import copy

    model32, tokenizer = tiny_model
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = copy.deepcopy(model32).to(dtype)
        pipe = TokenwiseQuestionPipeline(model=model, tokenizer=tokenizer, device=model.device)
        for row in tiny_rows.itertuples():
            ids = pipe.preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**9)
            c, q = ids["context_ids"], ids["questions_ids"][0]
            out[dtype, row.task] = (_last_logits(model, c, q, False), _last_logits(model, c, q, True),
                                    _last_logits(model, c, q, True))
    return out


@pytest.mark.slow
def test_float32_feeds_agree(feeds):
    for (dtype, _), (batched, tokenwise, _) in feeds.items():
        if dtype == torch.float32:
            assert (batched - tokenwise).abs().max() < 1e-4 and batched.argmax() == tokenwise.argmax()


@pytest.mark.slow
def test_bfloat16_feeds_differ_by_rounding_only_and_repeat(feeds):
    diffs = []
    for (dtype, _), (batched, tokenwise, again) in feeds.items():
        if dtype == torch.bfloat16:
            assert torch.equal(tokenwise, again)  # each feed is deterministic
            diffs.append(float((batched - tokenwise).abs().max()))
    assert max(diffs) > 0  # bf16 rounds the two feeds differently ...
    assert max(diffs) < 0.5  # ... by rounding, not by a different computation
