"""The submission press is a real KVPress press: it keeps what the method says, equals KVPress's SnapKV and
the project's FRC scorer when the method computes the same scores, and composes with KVPress's wrappers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from kvpress import AdaKVPress, ChunkKVPress, SnapKVPress

from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes, submission_press, trusted_press
from cachecraft_lib.methods.scorers import FRCScorerPress
from cachecraft_lib.models.prefill import SharedPrefill

ASSETS = Path(__file__).parent / "assets" / "arena"
FRC = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "frc"
SNAPKV_METHOD = '''import math

import numpy as np


class Method:
    """SnapKV's scores in numpy: window attention averaged over queries, pooled (kernel 5), per KV group."""

    def score(self, layer):
        q, k = layer.queries, np.repeat(layer.keys, layer.groups, axis=0)
        w, n = q.shape[1], k.shape[1]
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        logits = np.where(np.triu(np.ones((w, n), dtype=bool), k=n - w + 1), -np.inf, logits)
        attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
        attn /= attn.sum(axis=-1, keepdims=True)
        s = np.pad(attn[..., : n - w].mean(axis=1), ((0, 0), (2, 2)))
        pooled = sum(s[:, i : i + n - w] for i in range(5)) / 5
        pooled = pooled.reshape(layer.n_kv_heads, layer.groups, -1).mean(axis=1)
        return np.concatenate([pooled, np.full((layer.n_kv_heads, w), pooled.max() + 1)], axis=1)
'''
HAND_METHOD = '''import numpy as np


class Method:
    """Head h keeps the first budget - h even tokens, and the last token."""

    def keep(self, layer):
        n = layer.budget - 1
        return np.stack([np.r_[np.arange(0, 2 * n, 2)[: n], layer.n_tokens - 1] for h in range(layer.n_kv_heads)])
'''


@pytest.fixture(scope="module")
def prefill():
    from cachecraft_lib.models.loading import load_model

    model, _ = load_model("tiny", device="cpu", dtype="float32")
    torch.manual_seed(0)
    yield SharedPrefill(model, torch.randint(10, 1000, (1, 200)))
    close_sandboxes()


def _submission(tmp_path: Path, code: str, name: str):
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    return load_submission(folder)


def test_keeps_exactly_what_the_method_says(prefill, tmp_path):
    sub = _submission(tmp_path, HAND_METHOD, "hand")
    full = prefill.cache_for(None)
    cache = prefill.cache_for(submission_press(sub, 0.75))
    budget = int(200 * 0.25)
    kept = torch.cat([torch.arange(0, 2 * (budget - 1), 2), torch.tensor([199])])
    for layer in range(len(full.layers)):
        assert cache.layers[layer].keys.shape[2] == budget
        assert torch.equal(cache.layers[layer].keys, full.layers[layer].keys[:, :, kept])
        assert torch.equal(cache.layers[layer].values, full.layers[layer].values[:, :, kept])


def test_scores_equal_kvpress_snapkv(prefill, tmp_path):
    sub = _submission(tmp_path, SNAPKV_METHOD, "snap")
    mine = prefill.scores_for(submission_press(sub, 0.5, window=32))
    theirs = prefill.scores_for(SnapKVPress(0.5, window_size=32))
    for a, b in zip(mine, theirs, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6)
    ours, ref = prefill.cache_for(submission_press(sub, 0.5, window=32)), prefill.cache_for(SnapKVPress(0.5, 32))
    assert all(torch.equal(x.keys, y.keys) for x, y in zip(ours.layers, ref.layers, strict=True))


def test_frc_submission_equals_the_frc_scorer(prefill):
    mine = prefill.scores_for(submission_press(load_submission(FRC), 0.5))
    theirs = prefill.scores_for(FRCScorerPress(0.5))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(mine, theirs, strict=True))


def test_composes_with_kvpress_wrappers(prefill):
    sub = load_submission(FRC)
    ada = prefill.cache_for(AdaKVPress(submission_press(sub, 0.5)))  # masks keys head-wise
    assert ada.layers[0].keys.shape[2] == 200
    chunked = prefill.cache_for(ChunkKVPress(submission_press(sub, 0.5), chunk_length=20))
    assert chunked.layers[0].keys.shape[2] == 100
    base = prefill.cache_for(trusted_press(SnapKVPress(0.5)))
    assert base.layers[0].keys.shape[2] == 100


def test_a_bad_method_fails_the_press_with_its_kind(prefill):
    with pytest.raises(SubmissionError) as err:
        prefill.cache_for(submission_press(load_submission(ASSETS / "over_budget"), 0.5))
    assert err.value.kind == "over_budget"
    with pytest.raises(TypeError, match="limits"):
        submission_press(load_submission(FRC), 0.5, cpu=3)


@pytest.mark.parametrize("program", ["FRC_PROGRAM", "V1_PROGRAM"])
def test_a_converted_policy_program_keeps_what_the_suite_keeps(prefill, tmp_path, program):
    from cachecraft_lib.arena.submissions.from_program import program_to_submission
    from cachecraft_lib.methods import programs as policy_programs
    from cachecraft_lib.methods.registry import PolicyPress

    path = getattr(policy_programs, program)
    sub = program_to_submission(path, tmp_path / "sub", "converted")
    assert sub.returns == "indices" and "from cachecraft_lib" not in (tmp_path / "sub" / "method.py").read_text()
    ours = prefill.cache_for(submission_press(sub, 0.5))  # L = 200: whole chunks fit the budget exactly
    suite = prefill.cache_for(PolicyPress(policy=path, compression_ratio=0.5))
    for x, y in zip(ours.layers, suite.layers, strict=True):
        assert x.keys.shape == y.keys.shape and torch.allclose(x.keys, y.keys)


def test_converter_finds_a_runs_best_program_and_refuses_others(tmp_path):
    from cachecraft_lib.arena.submissions.from_program import find_program, program_to_submission
    from cachecraft_lib.methods import programs as policy_programs

    run = tmp_path / "run" / "seed42" / "best"
    run.mkdir(parents=True)
    (run / "best_program.py").write_text(policy_programs.FRC_PROGRAM.read_text())
    assert find_program(tmp_path / "run") == run / "best_program.py"
    with pytest.raises(FileNotFoundError, match="best_program"):
        find_program(tmp_path / "empty")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\ndef score_tokens(ctx):\n    return 0\n\ndef select_tokens_to_keep(s, ctx):\n    return 0\n")
    with pytest.raises(SubmissionError) as err:
        program_to_submission(bad, tmp_path / "out", "bad")
    assert err.value.kind == "file_access"
