"""Hook: rewrite. keep() may return new keys/values for the entries it keeps; the press writes them into the cache
(same number of entries, same dtype), and every malformed rewrite is refused outside the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes, submission_press
from cachecraft_lib.models.prefill import SharedPrefill

ASSETS = Path(__file__).parent / "assets" / "arena"
# keeps the last `budget` tokens, listed newest first (the harness sorts), and merges every evicted token's value
# into the oldest kept one (their mean), keys scaled by 1.5
MERGE = '''import numpy as np

from method_api import Rewrite


class Method:
    def keep(self, layer):
        n, b = layer.n_tokens, layer.budget
        idx = np.stack([np.arange(n - 1, n - b - 1, -1)] * layer.n_kv_heads)
        keys = layer.keys[:, ::-1][:, :b] * np.float32(1.5)
        values = np.array(layer.values[:, ::-1][:, :b])
        values[:, b - 1] = layer.values[:, : n - b + 1].mean(axis=1)
        return Rewrite(idx, keys=np.ascontiguousarray(keys, dtype=np.float32), values=values.astype(np.float32))
'''
PLAIN = '''import numpy as np


class Method:
    def keep(self, layer):
        return np.arange(layer.n_tokens - layer.budget, layer.n_tokens)
'''
ZERO_VALUES = '''import numpy as np

from method_api import Rewrite


class Method:
    def keep(self, layer):
        idx = np.arange(layer.n_tokens - layer.budget, layer.n_tokens)
        return Rewrite(np.stack([idx] * layer.n_kv_heads), values=np.zeros((layer.n_kv_heads, layer.budget,
                                                                           layer.values.shape[2]), np.float32))
'''
BAD = '''import numpy as np

from method_api import Rewrite


class Method:
    def keep(self, layer):
        h, b, d = layer.n_kv_heads, layer.budget, layer.keys.shape[2]
        idx = np.stack([np.arange(layer.n_tokens - b, layer.n_tokens)] * h)
        new = np.zeros((h, b, d), np.float32)
        case = "__CASE__"
        if case == "nan":
            new[0, 0, 0] = np.nan
        if case == "shape":
            new = new[:, :-1]
        if case == "dtype":
            new = new.astype(np.float64)
        if case == "over_budget":
            idx = np.stack([np.arange(layer.n_tokens - b - 1, layer.n_tokens)] * h)
            new = np.zeros((h, b + 1, d), np.float32)
        if case == "huge":
            new = np.zeros((h, b, 40 * 1024 * 1024 // (h * b)), np.float32)
        if case == "broadcast":
            new = np.zeros((1, b, d), np.float32)
        if case == "overflow":
            new[0, 0, 0] = 1e30
        if case == "objects":
            new = np.array([object()] * 3)
        return Rewrite(idx, keys=new)
'''
SCORE_REWRITE = '''import numpy as np

from method_api import Rewrite


class Method:
    def score(self, layer):
        return Rewrite(np.ones(layer.n_tokens), keys=np.array(layer.keys))
'''


@pytest.fixture(scope="module")
def model():
    from cachecraft_lib.models.loading import load_model

    return load_model("tiny", device="cpu", dtype="float32")[0]


@pytest.fixture(scope="module")
def prefill(model):
    torch.manual_seed(0)
    yield SharedPrefill(model, torch.randint(10, 1000, (1, 100)))
    close_sandboxes()


def _sub(tmp_path: Path, code: str, name: str):
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    return load_submission(folder)


def test_the_rewrite_is_what_the_cache_holds(prefill, tmp_path):
    full = prefill.cache_for(None)
    cache = prefill.cache_for(submission_press(_sub(tmp_path, MERGE, "merge"), 0.75))
    n, b = 100, 25
    for layer in range(len(full.layers)):
        k, v = full.layers[layer].keys, full.layers[layer].values
        got_k, got_v = cache.layers[layer].keys, cache.layers[layer].values
        assert got_k.shape == (k.shape[0], k.shape[1], b, k.shape[3]) and got_k.dtype == k.dtype  # accounting
        assert torch.allclose(got_k, k[:, :, n - b:] * 1.5)  # sorted back to cache order, rows with their index
        assert torch.allclose(got_v[:, :, 1:], v[:, :, n - b + 1:])
        assert torch.allclose(got_v[:, :, 0], v[:, :, : n - b + 1].mean(dim=2), atol=1e-6)


def test_a_rewrite_changes_the_answer(model, prefill, tmp_path):
    plain = prefill.cache_for(submission_press(_sub(tmp_path, PLAIN, "plain"), 0.5))
    zeroed = prefill.cache_for(submission_press(_sub(tmp_path, ZERO_VALUES, "zeroed"), 0.5))
    assert all(torch.equal(p.keys, z.keys) for p, z in zip(plain.layers, zeroed.layers, strict=True))
    nxt = torch.tensor([[42, 43, 44]])
    with torch.no_grad():
        a = model(input_ids=nxt, past_key_values=plain).logits[0, -1]
        b = model(input_ids=nxt, past_key_values=zeroed).logits[0, -1]
    assert (a - b).abs().max() > 1e-2


@pytest.mark.parametrize("case", ["nan", "shape", "dtype", "over_budget", "huge", "broadcast", "overflow",
                                  "objects"])
def test_malformed_rewrites_are_refused(prefill, tmp_path, case):
    sub = _sub(tmp_path, BAD.replace("__CASE__", case), f"bad-{case.replace('_', '-')}")
    with pytest.raises(SubmissionError) as err:
        prefill.cache_for(submission_press(sub, 0.75))
    assert err.value.kind in {"bad_output", "over_budget", "protocol"}, err.value


def test_fp16_overflow_is_refused_for_a_half_cache():
    from cachecraft_lib.arena.submissions.sandbox import validate_rewrite

    new = np.zeros((2, 3, 4), np.float32)
    new[1, 2, 3] = 1e6
    idx = np.tile(np.arange(3), (2, 1))
    validate_rewrite({"keys": new}, idx, (2, 10, 4), torch.float32)
    with pytest.raises(SubmissionError, match="overflows"):
        validate_rewrite({"keys": new}, idx, (2, 10, 4), torch.float16)


def test_only_keep_may_rewrite(prefill, tmp_path):
    with pytest.raises(SubmissionError, match="only keep"):
        prefill.cache_for(submission_press(_sub(tmp_path, SCORE_REWRITE, "score-rewrite"), 0.75))
