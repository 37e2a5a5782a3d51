"""Hook: probes. The harness replays a submission's declared probe texts after the context and gives the method
their queries per layer; the probes' cost is in the overhead; on query-agnostic boards a probe that carries the
question is refused before anything runs; probes are bounded in number, characters and tokens."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import DynamicCache

from cachecraft_lib.arena.board_runner import BoardRunner, count_flops, submission_contender
from cachecraft_lib.arena.boards.boards import load_board
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes
from cachecraft_lib.arena.submissions.probe_press import probe_press
from cachecraft_lib.arena.submissions.probes import (
    MAX_PROBE_TOKENS,
    check_not_question,
    check_probes,
    probe_ids,
)

ASSETS = Path(__file__).parent / "assets" / "arena"
PROBE = "List every name, number, code, and key fact stated in the text above."
# scores each cached token by its key's dot product with the probes' summed queries of its KV group
PROBING = '''import numpy as np


class Method:
    def score(self, layer):
        assert layer.probe_queries.shape[1] == int(layer.probe_lengths.sum()) > 0
        q = layer.probe_queries.sum(axis=1).reshape(layer.n_kv_heads, layer.groups, -1).sum(axis=1)
        return np.einsum("hld,hd->hl", layer.keys, q)
'''


@pytest.fixture(scope="module")
def model_tok():
    from cachecraft_lib.models.loading import load_model

    yield load_model("tiny", device="cpu", dtype="float32")
    close_sandboxes()


def _sub(tmp_path: Path, probes: list[str], name: str = "prober", code: str = PROBING):
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    meta = f"name: {name}\nauthor: tester\nboards: [B_online]\nprobes:\n" + "".join(f"  - {p!r}\n" for p in probes)
    (folder / "metadata.yaml").write_text(meta)
    return load_submission(folder)


def _compress(model, press, ids):
    cache = DynamicCache()
    with count_flops() as counter, torch.no_grad():
        with press(model):
            model.model(input_ids=ids, past_key_values=cache)
    return cache, counter.get_total_flops()


def _layer0_probe_queries(model, tokenizer, text: str, start: int) -> torch.Tensor:
    """Layer 0's probe queries computed here from the weights: they depend on the probe and its positions only."""
    ids = probe_ids(tokenizer, [text])[0]
    attn = model.model.layers[0].self_attn
    h = model.model.layers[0].input_layernorm(model.model.embed_tokens(ids))
    pos = torch.arange(start, start + ids.shape[1])[None]
    cos, sin = model.model.rotary_emb(h, pos)
    q = attn.q_proj(h).view(1, ids.shape[1], -1, attn.head_dim).transpose(1, 2)
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    return apply_rotary_pos_emb(q, q, cos, sin)[0][0]


def test_the_probes_queries_reach_the_method(model_tok, tmp_path):
    model, tokenizer = model_tok
    torch.manual_seed(0)
    ids = torch.randint(10, 1000, (1, 90))
    sub = _sub(tmp_path, [PROBE])
    assert "probes" in sub.hooks
    cache, _ = _compress(model, lambda m: probe_press(sub, 0.5, tokenizer=tokenizer)(m), ids)
    full = DynamicCache()
    with torch.no_grad():
        model.model(input_ids=ids, past_key_values=full)
    keys = full.layers[0].keys[0]
    q = _layer0_probe_queries(model, tokenizer, PROBE, 90).detach()
    groups = q.shape[0] // keys.shape[0]
    expected = torch.einsum("hld,hd->hl", keys, q.sum(1).reshape(keys.shape[0], groups, -1).sum(1))
    kept = expected.topk(45, dim=-1).indices.sort(dim=-1).values  # the press keeps cache order
    want = keys.gather(1, kept[..., None].expand(-1, -1, keys.shape[-1]))
    assert torch.allclose(cache.layers[0].keys[0], want, atol=1e-4)
    assert all(layer.keys.shape[2] == 45 for layer in cache.layers)  # every layer compressed, no probe token kept


def test_other_probes_keep_other_entries_and_cost_overhead(model_tok, tmp_path):
    model, tokenizer = model_tok
    torch.manual_seed(1)
    ids = torch.randint(10, 1000, (1, 80))
    a = _sub(tmp_path, [PROBE], "a")
    b = _sub(tmp_path, ["Repeat the previous context exactly."], "b")
    ca, fa = _compress(model, lambda m: probe_press(a, 0.5, tokenizer=tokenizer)(m), ids)
    cb, _ = _compress(model, lambda m: probe_press(b, 0.5, tokenizer=tokenizer)(m), ids)
    assert any(not torch.equal(x.keys, y.keys) for x, y in zip(ca.layers, cb.layers, strict=True))
    plain = DynamicCache()
    with count_flops() as counter, torch.no_grad():
        model.model(input_ids=ids, past_key_values=plain)
    assert fa > counter.get_total_flops()  # the probe's forward is counted with the compression


def test_a_probing_submission_is_an_own_prefill_contender(tmp_path):
    c = submission_contender(_sub(tmp_path, [PROBE]))
    assert c.own_prefill and c.probes == (PROBE,)
    assert not submission_contender(load_submission(ASSETS / "good_scores")).own_prefill


@pytest.mark.parametrize("question", ["What is the special magic number for x?",
                                      "what is the SPECIAL magic-number for x"])
def test_a_probe_carrying_the_question_is_refused_on_b_boards(model_tok, tmp_path, question):
    model, tokenizer = model_tok
    q = "What is the special magic number for x?"
    sub = _sub(tmp_path, [f"Answer this: {question}"], "leaky")
    group = pd.DataFrame([{"context": "Some text. The special magic number for x is 7. " * 5, "question": q,
                           "answer_prefix": "Answer:", "answer": ["7"], "max_new_tokens": 4, "item": 0,
                           "context_id": 0, "task": "niah_single_1", "length": 64}])
    runner = BoardRunner(model, tokenizer, load_board("cpu", "B_online"))
    with pytest.raises(SubmissionError) as err:
        runner._compress(group, [submission_contender(sub)])
    assert err.value.kind == "probe_is_question"
    check_not_question([PROBE], [q])  # a fixed probe that is not the question passes
    aware = BoardRunner(model, tokenizer, load_board("cpu", "A"))
    assert aware.board.query_aware  # on A the question is in the context anyway: no check


def test_probes_are_bounded(model_tok):
    _, tokenizer = model_tok
    for bad in (["x"] * 5, ["x" * 401], [""], [3], "   "):
        with pytest.raises(SubmissionError) as err:
            check_probes(bad if bad != "   " else [bad])
        assert err.value.kind == "bad_probe"
    with pytest.raises(SubmissionError, match="tokens"):
        probe_ids(tokenizer, [" ".join(["zq"] * (MAX_PROBE_TOKENS + 1))[:400]])
    assert check_probes(None) == () and check_probes(PROBE) == (PROBE,)


def test_a_probing_method_is_held_to_the_sandbox_limits(model_tok, tmp_path):
    model, tokenizer = model_tok
    spins = PROBING.replace("    def score(self, layer):\n", "    def score(self, layer):\n        while True:\n"
                                                                "            pass\n")
    sub = _sub(tmp_path, [PROBE], "spins", spins)
    with pytest.raises(SubmissionError) as err:
        _compress(model, lambda m: probe_press(sub, 0.5, tokenizer=tokenizer, timeout_s=0.5)(m),
                  torch.randint(10, 1000, (1, 40)))
    assert err.value.kind == "timeout"
    writes = PROBING.replace("    def score(self, layer):\n", "    def score(self, layer):\n"
                                                                "        layer.probe_queries[0, 0, 0] = 1.0\n")
    with pytest.raises(SubmissionError) as err:
        _compress(model, lambda m: probe_press(_sub(tmp_path, [PROBE], "writes", writes), 0.5,
                                               tokenizer=tokenizer)(m), torch.randint(10, 1000, (1, 40)))
    assert err.value.kind == "tampering"  # the probes' queries are read-only like every input


def test_a_probing_submission_runs_on_a_board_end_to_end(model_tok, tmp_path):
    model, tokenizer = model_tok
    sub = _sub(tmp_path, [PROBE], "e2e")
    group = pd.DataFrame([{"context": "Notes. The special magic number for Oslo is 4821. " * 8,
                           "question": f"What is the special magic number for Oslo? {i}", "answer_prefix": "Answer:",
                           "answer": ["4821"], "max_new_tokens": 4, "item": i, "context_id": 0,
                           "task": "niah_single_1", "length": 128} for i in range(2)])
    board = dataclasses.replace(load_board("cpu", "B_online"), budgets=(0.5,))
    rows = BoardRunner(model, tokenizer, board).run(group, [submission_contender(sub)], progress=False)
    mine, full = rows[rows.method == "e2e"], rows[rows.method == "no_press"]
    assert len(mine) == 2 and len(full) == 2  # one compressed cache answers both questions
    assert (mine.overhead_flops > 0).all()  # the probe's replay is charged
    assert (mine.logical_entries < 0.55 * full.logical_entries.to_numpy()).all()


def test_a_probing_keep_may_rewrite(model_tok, tmp_path):
    model, tokenizer = model_tok
    code = '''import numpy as np

from method_api import Rewrite


class Method:
    def keep(self, layer):
        assert layer.probe_queries is not None
        idx = np.arange(layer.n_tokens - layer.budget, layer.n_tokens)
        values = np.zeros((layer.n_kv_heads, layer.budget, layer.values.shape[2]), np.float32)
        return Rewrite(np.stack([idx] * layer.n_kv_heads), values=values)
'''
    cache, _ = _compress(model, lambda m: probe_press(_sub(tmp_path, [PROBE], "pk", code), 0.5,
                                                      tokenizer=tokenizer)(m), torch.randint(10, 1000, (1, 40)))
    assert all(layer.keys.shape[2] == 20 and not layer.values.any() for layer in cache.layers)
