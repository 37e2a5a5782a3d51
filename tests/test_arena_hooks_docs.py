"""Item 7: every hook's minimal example in docs/arena_submissions.md runs as written through its real press on the
tiny model (so the guide cannot drift from the interface), and ``arena check`` names the hooks a folder uses."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import DynamicCache

from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes, submission_press
from cachecraft_lib.arena.submissions.probe_press import probe_press
from cachecraft_lib.arena.submissions.whole_cache import whole_cache_press
from cachecraft_lib.cli.arena import _cmd_check
from cachecraft_lib.models.prefill import SharedPrefill

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).parent / "assets" / "arena"
GUIDE = (REPO / "docs" / "arena_submissions.md").read_text()
HOOKS = GUIDE[GUIDE.index("## Hooks beyond"):GUIDE.index("## Converting a search run")]
PYTHON = re.findall(r"```python\n(.*?)```", HOOKS, re.S)
YAML = re.findall(r"```yaml\n(.*?)```", HOOKS, re.S)
N = 96


@pytest.fixture(scope="module")
def model_tok():
    from cachecraft_lib.models.loading import load_model

    yield load_model("tiny", device="cpu", dtype="float32")
    close_sandboxes()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(10, 1000, (1, N), generator=torch.Generator().manual_seed(1))


def _folder(tmp_path: Path, code: str, meta: str, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "method.py").write_text(code)
    (folder / "metadata.yaml").write_text(meta)
    return folder


def _check(folder: Path, capsys) -> str:
    assert _cmd_check(argparse.Namespace(folder=str(folder))) == 0
    return capsys.readouterr().out


def test_the_guide_has_one_example_per_hook():
    assert len(PYTHON) == 4 and len(YAML) == 1
    assert [h in HOOKS for h in ("params.npz", "Rewrite", "probes", "whole_cache")] == [True] * 4


def test_the_params_example(model_tok, ids, tmp_path, capsys):
    model, _ = model_tok
    folder = _folder(tmp_path, PYTHON[0], "name: fitted\nauthor: me\nboards: [A]\n", "fitted")
    w = np.random.default_rng(0).normal(size=model.config.head_dim).astype(np.float32)
    np.savez(folder / "params.npz", w=w)
    assert "hooks score, params" in _check(folder, capsys)
    shared = SharedPrefill(model, ids)
    cache = shared.cache_for(submission_press(load_submission(folder), 0.5))
    full = shared.cache_for(None)
    kept = (full.layers[0].keys @ torch.from_numpy(w)).topk(N // 2, dim=-1).indices  # ScorerPress order
    assert torch.equal(cache.layers[0].keys, full.layers[0].keys.gather(2, kept[..., None].expand(-1, -1, -1,
                                                                                                  w.size)))


def test_the_rewrite_example(model_tok, ids, tmp_path, capsys):
    model, _ = model_tok
    folder = _folder(tmp_path, PYTHON[1], "name: merged\nauthor: me\nboards: [A]\n", "merged")
    assert "hooks keep, rewrite" in _check(folder, capsys)
    shared = SharedPrefill(model, ids)
    cache, full = shared.cache_for(submission_press(load_submission(folder), 0.5)), shared.cache_for(None)
    n = N // 2
    torch.testing.assert_close(cache.layers[0].values[:, :, 0], full.layers[0].values[:, :, : N - n + 1].mean(2))
    assert torch.equal(cache.layers[0].values[:, :, 1:], full.layers[0].values[:, :, N - n + 1:])


def test_the_probe_example(model_tok, ids, tmp_path, capsys):
    model, tokenizer = model_tok
    folder = _folder(tmp_path, PYTHON[2], YAML[0], "my-probe")
    assert yaml.safe_load(YAML[0])["probes"]
    assert "probes" in _check(folder, capsys)
    cache = DynamicCache()
    with torch.no_grad(), probe_press(load_submission(folder), 0.5, tokenizer=tokenizer)(model):
        model.model(input_ids=ids, past_key_values=cache)
    assert all(layer.keys.shape[2] == N // 2 for layer in cache.layers)


def test_the_whole_cache_example(model_tok, ids, tmp_path, capsys):
    model, _ = model_tok
    folder = _folder(tmp_path, PYTHON[3], "name: votes\nauthor: me\nboards: [A, B_offline]\n", "votes")
    assert "hooks score, whole_cache" in _check(folder, capsys)
    shared = SharedPrefill(model, ids)
    full = shared.cache_for(None)
    cache = shared.cache_for(whole_cache_press(load_submission(folder), 0.5))
    votes = full.layers[-1].keys.norm(dim=-1).numpy()
    kept = torch.from_numpy(np.sort(np.argsort(-votes, axis=-1, kind="stable")[..., : N // 2], axis=-1))
    assert torch.equal(cache.layers[0].keys, full.layers[0].keys.gather(2, kept[..., None].expand(
        -1, -1, -1, full.layers[0].keys.shape[-1])))
