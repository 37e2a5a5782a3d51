"""The post's spanvote, probevr and kvprior as example submissions: each passes `arena check` naming its hooks,
depends on what its hook gives it (spanvote's layer-0 choice on the other layers' vote, probevr's scores on its
probe, kvprior's on its params.npz, which fit.py regenerates from dev traces), and runs through its board at
smoke (one context each)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.board_runner import BoardRunner, submission_contender
from cachecraft_lib.arena.boards.boards import load_board
from cachecraft_lib.arena.post_methods import EXAMPLES
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.method_api import Layer
from cachecraft_lib.arena.submissions.press import close_sandboxes

HOOKS = {"spanvote": {"whole_cache"}, "probevr": {"score", "probes"}, "kvprior": {"decode", "params"}}
POST_PROBE = "List every name, number, code, and key fact stated in the text above."


def _module(name: str):
    """An example's method.py imported here (numpy only), to test its functions on synthetic layers."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "method.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _layer(rng, layer: int, n: int = 96, heads: int = 2, groups: int = 2, dim: int = 8, window: int = 8, **kw):
    return Layer(keys=rng.normal(size=(heads, n, dim)).astype(np.float32),
                 values=rng.normal(size=(heads, n, dim)).astype(np.float32),
                 queries=rng.normal(size=(heads * groups, window, dim)).astype(np.float32),
                 positions=np.arange(n), budget=kw.pop("budget", n // 4), layer=layer, n_layers=4,
                 compression_ratio=0.75, **kw)


@pytest.fixture(scope="module")
def model_tok():
    from cachecraft_lib.models.loading import load_model

    yield load_model("tiny", device="cpu", dtype="float32")
    close_sandboxes()


def _one_context(tokenizer, board: str, profile: str = "smoke") -> tuple[pd.DataFrame, object]:
    """The first dev context of the smoke board (its questions), and the board at its first budget only."""
    from cachecraft_lib.arena.boards.items import board_items

    b = load_board(profile, board)
    items = board_items(b, "dev", tokenizer)
    first = items[items.context_id == items.context_id.iloc[0]]
    return first, dataclasses.replace(b, budgets=(b.budgets[-1],))


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_each_example_passes_arena_check_naming_its_hooks(name, capsys):
    from cachecraft_lib.cli import main

    assert main(["arena", "check", str(EXAMPLES / name)]) == 0
    out = capsys.readouterr().out
    hooks = set(out.split("hooks ", 1)[1].split(", code", 1)[0].split(", "))
    assert out.startswith("ok: ") and hooks == HOOKS[name]


# ----------------------------------------------------------------------------------------------- spanvote
def test_spanvote_layer_zero_keeps_what_the_other_layers_vote_for():
    mod, rng = _module("spanvote"), np.random.default_rng(0)
    layers = [_layer(rng, i) for i in range(4)]
    target = 17  # the last layer's heads all point at entry 17: a sharp, important head's vote
    last = layers[-1]
    q = np.repeat(last.keys[:, target][:, None] * 6.0, last.queries.shape[1], axis=1)
    layers[-1] = dataclasses.replace(last, queries=np.repeat(q, 2, axis=0).astype(np.float32))
    own, _ = mod.own_scores(layers[0])
    budget = layers[0].budget
    assert target not in set(np.argsort(-own[0])[:budget - 8])  # layer 0 on its own would not keep it
    answers = mod.Method().whole_cache(layers)
    assert len(answers) == 4 and all(a.shape == (2, 96) and np.isfinite(a).all() for a in answers)
    for a in answers:  # every layer and head keeps it (the vote), and the window, pinned above all
        kept = np.argsort(-a, axis=1)[:, :budget]
        assert (kept == target).any(axis=1).all() and set(range(88, 96)) <= set(kept[0])
    assert (answers[0][:, :88] >= own - 1e-6).all()  # each head keeps the max of its own and the voted score
    alone = mod.Method().whole_cache([layers[0], *[_layer(np.random.default_rng(9), i) for i in (1, 2, 3)]])
    assert not np.allclose(alone[0], answers[0])  # layer 0's answer depends on the other layers


def test_spanvote_runs_on_smoke_b_offline(model_tok):
    model, tokenizer = model_tok
    sub = load_submission(EXAMPLES / "spanvote")
    assert sub.boards == ("B_offline",) and sub.whole_cache
    items, board = _one_context(tokenizer, "B_offline")
    rows = BoardRunner(model, tokenizer, board).run(items, [submission_contender(sub)], progress=False)
    close_sandboxes()
    mine = rows[rows.method == "spanvote"]
    assert len(mine) == len(items) and mine.score.between(0, 100).all()
    assert (abs(mine.logical_entries / mine.full_entries - board.budgets[0]) < 0.01).all()
    assert (mine.overhead_flops > 0).all()  # the whole-cache call's seconds are charged


# ------------------------------------------------------------------------------------------------ probevr
def test_probevr_scores_follow_its_probe():
    mod, rng = _module("probevr"), np.random.default_rng(1)
    base = _layer(rng, 0, probe_lengths=np.array([6]))
    u = np.ones(8, np.float32) / np.sqrt(8)
    keys = base.keys.copy()
    keys[:, 30] = 4.0 * u  # the probe asks about entry 30: its queries point along entry 30's key
    probe = np.broadcast_to(4.0 * u, (4, 6, 8))
    layer = dataclasses.replace(base, keys=keys, probe_queries=np.ascontiguousarray(probe, dtype=np.float32))
    scores = mod.Method().score(layer)
    assert scores.shape == (2, 96) and (np.argsort(-scores, axis=1)[:, :8] == 30).any(axis=1).all()
    other = dataclasses.replace(layer, probe_queries=np.ascontiguousarray(layer.probe_queries[:, ::-1] * -1.0))
    assert not np.allclose(mod.Method().score(other), scores)
    unreplayed = mod.Method().score(dataclasses.replace(layer, probe_queries=None, probe_lengths=None))
    assert unreplayed.shape == (2, 96) and np.isfinite(unreplayed).all()  # the window's queries stand in


def test_probevr_declares_the_posts_probe_and_runs_on_smoke_b_online(model_tok):
    model, tokenizer = model_tok
    sub = load_submission(EXAMPLES / "probevr")
    assert sub.probes == (POST_PROBE,) and "B_online" in sub.boards
    items, board = _one_context(tokenizer, "B_online")
    assert not any(POST_PROBE.lower() in q.lower() for q in items.question)
    rows = BoardRunner(model, tokenizer, board).run(items, [submission_contender(sub)], progress=False)
    close_sandboxes()
    mine = rows[rows.method == "probevr"]
    assert len(mine) == len(items)  # one compressed cache answers every question of the context
    assert (mine.overhead_flops > 0).all()  # the probe's replay is charged
    assert (abs(mine.logical_entries / mine.full_entries - board.budgets[0]) < 0.01).all()


# ------------------------------------------------------------------------------------------------ kvprior
def test_kvprior_scores_come_from_its_params():
    mod, rng = _module("kvprior"), np.random.default_rng(2)
    sub = load_submission(EXAMPLES / "kvprior")
    params = sub.params_arrays
    assert set(params) >= {"w", "b", "mu", "sd"} and (EXAMPLES / "kvprior" / "params.npz").stat().st_size < 50_000
    heads, dim = params["w"].shape[1], params["w"].shape[2] * 2 // 3
    layer = _layer(rng, 1, heads=heads, dim=dim)
    layer = dataclasses.replace(layer, positions=np.tile(np.arange(layer.n_tokens), (heads, 1)))  # decode's
    fitted = mod.Method(params).decode(layer)
    flipped = mod.Method({**params, "w": -params["w"]}).decode(layer)
    recent = max(1, int(mod.RECENT * layer.budget))
    old = slice(0, layer.n_tokens - recent)
    assert fitted.shape == (heads, layer.n_tokens)
    for h in range(heads):  # the weights rank the entries: negated weights reverse the order
        assert np.corrcoef(fitted[h, old], flipped[h, old])[0, 1] < -0.999
    assert (fitted[:, -recent:].min(axis=1) > fitted[:, old].max(axis=1)).all()  # the newest are kept
    moved = layer.keys.copy()  # RoPE-like: rotating a pair (i, i + D/2) leaves the prior unchanged
    half = dim // 2
    c, s = np.cos(0.7), np.sin(0.7)
    moved[..., :half], moved[..., half:] = c * layer.keys[..., :half] - s * layer.keys[..., half:], \
        s * layer.keys[..., :half] + c * layer.keys[..., half:]
    np.testing.assert_allclose(mod.Method(params).decode(dataclasses.replace(layer, keys=moved)), fitted, atol=1e-4)


def test_kvprior_fit_reproduces_the_shipped_params_from_dev_traces():
    spec = importlib.util.spec_from_file_location("kvprior_fit", EXAMPLES / "kvprior" / "fit.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    from cachecraft_lib.arena.arena import Arena

    traces, items = fit.dev_traces("cpu", "C")
    arena = Arena("cpu", progress=False)
    assert items == list(arena.items(arena.board("C"), "dev").item)  # the dev items, nothing else
    params = fit.fit(traces)
    with np.load(EXAMPLES / "kvprior" / "params.npz", allow_pickle=False) as shipped:
        assert sorted(shipped.files) == sorted(params)
        for name in shipped.files:
            np.testing.assert_allclose(params[name], shipped[name], rtol=1e-3, atol=1e-4, err_msg=name)


def test_kvprior_runs_on_smoke_board_c(model_tok):
    from cachecraft_lib.arena.board_c import DecodeBoardRunner

    model, tokenizer = model_tok
    sub = load_submission(EXAMPLES / "kvprior")
    assert sub.boards == ("C",) and sub.decode and sub.params_sha256
    items, board = _one_context(tokenizer, "C")
    rows = DecodeBoardRunner(model, tokenizer, board).run(items, [submission_contender(sub)], progress=False)
    close_sandboxes()
    mine = rows[rows.method == "kvprior"]
    assert len(mine) == len(items) and mine.score.between(0, 100).all()


def test_kvprior_fit_has_help():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(EXAMPLES / "kvprior" / "fit.py"), "--help"], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "dev items" in out.stdout and "--out" in out.stdout


# ------------------------------------------------------------------------- head-adaptive allocation (Ada-KV)
HEAD_ZERO_FIRST = '''import numpy as np


class Method:
    def score(self, layer):
        """Head 0's entries all score above every other head's: pooled, head 0 gets far more than its share."""
        s = np.tile(np.linspace(0.0, 1.0, layer.n_tokens), (layer.n_kv_heads, 1))
        s[0] += 10.0
        return s
'''


def test_head_adaptive_allocation_pools_a_layers_budget_over_its_heads(model_tok, tmp_path):
    import shutil

    from cachecraft_lib.arena.submissions.folder import SubmissionError
    from cachecraft_lib.arena.submissions.press import submission_press
    from cachecraft_lib.grid.decode import _head_mask
    from cachecraft_lib.models.prefill import SharedPrefill

    model, _ = model_tok
    folder = tmp_path / "pooled"
    shutil.copytree(EXAMPLES / "baselines" / "knorm", folder)
    (folder / "method.py").write_text(HEAD_ZERO_FIRST)
    (folder / "metadata.yaml").write_text("name: pooled\nauthor: tester\nboards: [A]\nallocation: head_adaptive\n")
    sub = load_submission(folder)
    assert sub.allocation == "head_adaptive" and "head_adaptive" in sub.hooks
    import torch

    prefill = SharedPrefill(model, torch.randint(10, 1000, (1, 100), generator=torch.Generator().manual_seed(0)))
    cache = prefill.cache_for(submission_press(sub, 0.5))
    for layer in range(len(cache.layers)):
        attn = model.model.layers[layer].self_attn
        mask = _head_mask(attn, cache.layers[layer].keys)  # True = evicted (masked; the entry stays physically)
        kept = (~mask).sum(dim=-1)  # (H_kv,) entries each head keeps
        assert cache.layers[layer].keys.shape[2] == 100  # masked, not removed: no physical memory saved
        assert int(kept.sum()) == 50 * cache.layers[layer].keys.shape[1]  # the layer's budget, pooled
        assert int(kept[0]) == 100 and int(kept[1:].min()) >= 10  # head 0 keeps all; the others their safeguard
    close_sandboxes()
    (folder / "metadata.yaml").write_text("name: pooled\nauthor: tester\nboards: [A]\nallocation: per_token\n")
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind == "bad_metadata"
