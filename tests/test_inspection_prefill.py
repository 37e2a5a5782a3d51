"""Inspection prefills what KVPress's pipeline prefills. On the embedded model (no chat template) that is
bos + context, exactly as before: ids and spans unchanged."""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib import ruler
from cachecraft_lib.models.loading import load_model
from cachecraft_lib.models.pipeline import make_pipeline
from cachecraft_lib.report.inspection import context_ids, prefill_text, token_span


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


@pytest.fixture(scope="module")
def row(tiny):
    return ruler.load(1024, tiny[1], source="offline", samples_per_task=1, seed=7, tasks=["niah_single_2"]).iloc[0]


def _old_span(tok, context, substring):
    """The span as inspection computed it before it followed KVPress's preprocess (bos + context only)."""
    start = context.find(substring)
    enc = tok(tok.bos_token + context, add_special_tokens=False, return_offsets_mapping=True)
    lo, hi = start + len(tok.bos_token), start + len(tok.bos_token) + len(substring)
    toks = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > lo and a < hi]
    return toks[0], toks[-1] + 1


def test_embedded_model_prefill_and_spans_are_unchanged(tiny, row):
    model, tok = tiny
    assert tok.chat_template is None
    old = tok.encode(tok.bos_token + row.context, add_special_tokens=False, return_tensors="pt")
    assert torch.equal(context_ids(tok, row.context), old)
    pipe_ids = make_pipeline(model, tok).preprocess(row.context, [row.question], row.answer_prefix, 10**9)
    assert torch.equal(context_ids(tok, row.context), pipe_ids["context_ids"])
    assert prefill_text(tok, row.context) == (tok.bos_token + row.context, len(tok.bos_token))
    value = row.answer[0]
    needle = row.context[row.context.rfind("One of the special magic", 0, row.context.find(value)):
                         row.context.find(value) + len(value)]
    for text in (value, needle, row.context[:40]):
        assert token_span(tok, row.context, text) == _old_span(tok, row.context, text)
    with pytest.raises(ValueError, match="not in the context"):
        token_span(tok, row.context, "no such text anywhere")


class _TrimmingTemplate:
    """A tokenizer stand-in whose chat template trims the message, as Llama-3.1's does."""

    chat_template = "trim"

    def apply_chat_template(self, messages, **kwargs):
        return "<head>" + messages[0]["content"].strip() + "<tail>"


def test_prefill_text_locates_a_context_whose_template_trims_it():
    text, offset = prefill_text(_TrimmingTemplate(), "  body of the context")
    assert text == "<head>body of the context" and text[offset + 2:] == "body of the context"
