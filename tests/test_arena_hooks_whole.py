"""Hook 2, the whole cache: ``whole_cache(layers)`` sees every layer before it decides any (its layer-0 choice
may depend on the last layer), runs only where the board's rules allow it (B_offline), its answers are validated
outside the sandbox, and its seconds are charged as compression overhead."""

from __future__ import annotations

import dataclasses
import shutil
import types
from pathlib import Path

import pytest
import torch

from cachecraft_lib.arena.board_runner import BoardRunner, submission_contender
from cachecraft_lib.arena.boards.boards import load_boards
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes
from cachecraft_lib.arena.submissions.whole_cache import SubmissionWholeCachePress, whole_cache_press
from cachecraft_lib.models.prefill import SharedPrefill

ASSETS = Path(__file__).parent / "assets" / "arena"
N_TOKENS = 120
LAST_LAYER_VOTES = '''import numpy as np


class Method:
    """Every layer keeps the tokens whose keys have the largest norm in the LAST layer."""

    def whole_cache(self, layers):
        votes = np.linalg.norm(layers[-1].keys, axis=-1)  # (H_kv, L)
        return [votes for _ in layers]
'''


def _folder(tmp_path: Path, code: str, name: str, boards: str = "[B_offline]") -> Path:
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    (folder / "metadata.yaml").write_text(f"name: {name}\nauthor: tester\nboards: {boards}\n")
    return folder


@pytest.fixture(scope="module")
def prefill():
    from cachecraft_lib.models.loading import load_model

    model, _ = load_model("tiny", device="cpu", dtype="float32")
    torch.manual_seed(0)
    yield SharedPrefill(model, torch.randint(10, 1000, (1, N_TOKENS)))
    close_sandboxes()


def _expected(full, budget: int) -> torch.Tensor:
    """(1, H, budget) indices the last layer's key norms choose (ties to the earlier entry)."""
    norms = full.layers[-1].keys.norm(dim=-1)
    order = torch.from_numpy(__import__("numpy").argsort(-norms.numpy(), axis=-1, kind="stable"))
    return order[..., :budget].sort(dim=-1).values


def test_layer_zero_is_decided_by_the_last_layer(prefill, tmp_path):
    sub = load_submission(_folder(tmp_path, LAST_LAYER_VOTES, "votes"))
    assert sub.whole_cache and "whole_cache" in sub.hooks
    full = prefill.cache_for(None)
    cache = prefill.cache_for(whole_cache_press(sub, 0.75))
    budget = int(N_TOKENS * 0.25)
    idx = _expected(full, budget)
    own = full.layers[0].keys.norm(dim=-1).topk(budget, dim=-1).indices.sort(dim=-1).values
    assert not torch.equal(idx, own)  # the test means something: layer 0's own norms would choose otherwise
    for layer in range(len(full.layers)):
        gather = idx[..., None].expand(-1, -1, -1, full.layers[layer].keys.shape[-1])
        assert cache.layers[layer].keys.shape[2] == budget
        assert torch.equal(cache.layers[layer].keys, full.layers[layer].keys.gather(2, gather))
        assert torch.equal(cache.layers[layer].values, full.layers[layer].values.gather(2, gather))


def test_a_live_prefill_gets_the_same_cache(prefill, tmp_path):
    from transformers import DynamicCache

    sub = load_submission(_folder(tmp_path, LAST_LAYER_VOTES, "votes"))
    shared = prefill.cache_for(whole_cache_press(sub, 0.75))
    torch.manual_seed(0)
    ids = torch.randint(10, 1000, (1, N_TOKENS))  # the fixture's tokens
    live = DynamicCache()
    with torch.no_grad(), whole_cache_press(sub, 0.75)(prefill.model):
        prefill.model.model(input_ids=ids, past_key_values=live)
    for a, b in zip(shared.layers, live.layers, strict=True):
        assert a.keys.shape == b.keys.shape
        torch.testing.assert_close(a.keys, b.keys)


MERGES = '''import numpy as np
from method_api import Rewrite


class Method:
    """Keeps the budget first entries of every layer; layer 0's values become the last layer's mean value."""

    def whole_cache(self, layers):
        keep = np.arange(layers[0].budget)
        mean = layers[-1].values.mean(axis=1, keepdims=True)
        first = Rewrite(keep, values=np.repeat(mean, keep.size, axis=1).astype(np.float32))
        return [first] + [keep for _ in layers[1:]]
'''


def test_a_whole_cache_rewrite_is_written_into_the_cache(prefill, tmp_path):
    sub = load_submission(_folder(tmp_path, MERGES, "merges"))
    full = prefill.cache_for(None)
    cache = prefill.cache_for(whole_cache_press(sub, 0.75))
    budget = int(N_TOKENS * 0.25)
    mean = full.layers[-1].values.mean(dim=2, keepdim=True).expand(-1, -1, budget, -1)
    torch.testing.assert_close(cache.layers[0].values, mean)
    assert torch.equal(cache.layers[0].keys, full.layers[0].keys[:, :, :budget])
    assert torch.equal(cache.layers[1].values, full.layers[1].values[:, :, :budget])


BAD = {
    "too_few": "return [np.zeros(layers[0].n_tokens)]",
    "nan": "return [np.full(layers[0].n_tokens, np.nan) for _ in layers]",
    "over_budget": "return [np.arange(layers[0].budget + 1) for _ in layers]",
    "not_a_list": "return np.zeros(3)",
    "strings": "return [np.array(['a']) for _ in layers]",
    "tampers": "object.__setattr__(layers[0], 'keys', layers[1].keys); return [np.arange(2) for _ in layers]",
    "rewrite_nan": "from method_api import Rewrite\n        k = np.arange(layers[0].budget)\n        "
                   "return [Rewrite(k, keys=np.full(layers[0].keys[:, :k.size].shape, np.nan, np.float32)) for _ in layers]",
    "rewrite_shape": "from method_api import Rewrite\n        k = np.arange(layers[0].budget)\n        "
                     "return [Rewrite(k, values=np.zeros((1, 1, 1), np.float32)) for _ in layers]",
    "rewrite_scores": "from method_api import Rewrite\n        s = np.zeros(layers[0].n_tokens)\n        "
                      "return [Rewrite(s, keys=layers[0].keys) for _ in layers]",
    "huge": "return [np.zeros((64, 1 << 20)) for _ in layers]",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_whole_cache_answers_are_refused(prefill, tmp_path, case):
    code = f"import numpy as np\n\n\nclass Method:\n    def whole_cache(self, layers):\n        {BAD[case]}\n"
    sub = load_submission(_folder(tmp_path, code, case.replace("_", "-")))
    with pytest.raises(SubmissionError) as err:
        prefill.cache_for(whole_cache_press(sub, 0.75, timeout_s=5.0, memory_mb=256))
    close_sandboxes()
    assert err.value.kind in {"bad_output", "over_budget", "tampering", "memory", "protocol", "crash"}
    if case in {"nan", "too_few", "not_a_list", "rewrite_nan", "rewrite_shape", "rewrite_scores"}:
        assert err.value.kind == "bad_output"


def test_a_whole_cache_call_is_held_to_the_cpu_limit(prefill, tmp_path):
    code = "class Method:\n    def whole_cache(self, layers):\n        while True:\n            pass\n"
    sub = load_submission(_folder(tmp_path, code, "spins"))
    with pytest.raises(SubmissionError) as err:
        prefill.cache_for(whole_cache_press(sub, 0.75, timeout_s=0.25, memory_mb=256))
    close_sandboxes()
    assert err.value.kind == "timeout"


def test_only_boards_whose_rules_allow_it_run_the_hook(tmp_path):
    boards = load_boards("cpu")
    assert [b for b in boards if boards[b].allows_whole_cache] == ["B_offline"]
    for profile in ("paper", "smoke"):
        assert [b for b, x in load_boards(profile).items() if x.allows_whole_cache] == ["B_offline"]
    with pytest.raises(SubmissionError) as err:  # refused at the folder check, before anything runs
        load_submission(_folder(tmp_path, LAST_LAYER_VOTES, "votes-a", "[A, B_offline]"))
    assert err.value.kind == "not_allowed" and "['A']" in str(err.value)
    sub = load_submission(_folder(tmp_path, LAST_LAYER_VOTES, "votes"))
    sub = dataclasses.replace(sub, boards=("A", "B_online", "B_offline"))  # past the check: the runner refuses too
    only_whole = submission_contender(sub)
    assert isinstance(only_whole.press_for(boards["B_offline"])(0.5), SubmissionWholeCachePress)
    for name in ("A", "B_online"):
        with pytest.raises(SubmissionError) as err:
            only_whole.press_for(boards[name])(0.5)
        assert err.value.kind == "not_allowed" and "B_offline" in str(err.value)
    both = LAST_LAYER_VOTES + "\n    def score(self, layer):\n        return np.zeros(layer.n_tokens)\n"
    c = submission_contender(load_submission(_folder(tmp_path, both, "both", "[A, B_offline]")))
    assert not isinstance(c.press_for(boards["A"])(0.5), SubmissionWholeCachePress)
    assert isinstance(c.press_for(boards["B_offline"])(0.5), SubmissionWholeCachePress)


def test_its_seconds_count_toward_the_overhead(prefill, tmp_path):
    sub = load_submission(_folder(tmp_path, LAST_LAYER_VOTES, "votes"))
    runner = types.SimpleNamespace(_prefill_rate=1e9)
    press = whole_cache_press(sub, 0.75)
    _, flops = BoardRunner._shared_cache(runner, prefill, press)
    assert press.charged_seconds > 0
    _, plain = BoardRunner._shared_cache(types.SimpleNamespace(_prefill_rate=0.0), prefill, whole_cache_press(sub, 0.75))
    assert flops >= plain + int(press.charged_seconds * 1e9) - 1


def test_end_to_end_on_b_offline_and_b_online(tmp_path):
    """Through the board runner (smoke boards, one 1024-token context): B_offline runs whole_cache (half the
    entries kept, its seconds in the overhead), B_online the same submission's score()."""
    from dataclasses import replace

    from cachecraft_lib.arena.boards.boards import load_board
    from cachecraft_lib.models.loading import load_model
    from cachecraft_lib.ruler import generate

    code = LAST_LAYER_VOTES + "\n    def score(self, layer):\n        return -layer.positions.astype(float)\n"
    sub = load_submission(_folder(tmp_path, code, "both", "[B_online, B_offline]"))
    model, tokenizer = load_model("tiny", device="cpu", dtype="float32")
    items = generate(1024, tokenizer, 1, 5, ["niah_single_1"]).assign(item="x/0", context_id="x", length=1024)
    out = {}
    for name in ("B_offline", "B_online"):
        board = replace(load_board("smoke", name), budgets=(0.5,))
        rows = BoardRunner(model, tokenizer, board).run(items, [submission_contender(sub)], progress=False)
        out[name] = rows.set_index("method").loc["both"]
    close_sandboxes()
    for row in out.values():
        assert abs(row.logical_entries / row.full_entries - 0.5) < 0.01
    # both compute the same window queries (counted FLOPs); only B_offline adds the whole_cache call's seconds
    assert out["B_offline"].overhead_flops > out["B_online"].overhead_flops > 0
