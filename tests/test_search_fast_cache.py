"""The population path's shortcuts give the arena's answers: a kept cache built straight from the prefill
(``policy_batch.kept_cache_row``) holds exactly what ``KeptIndicesPress`` through ``SharedPrefill.cache_for``
holds, and the decode memo's key (``selection_digest``) is equal exactly when the kept caches are."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cachecraft_lib.search.policy_batch import KeptIndicesPress, kept_cache_row, selection_digest


def _kept(rng: np.random.Generator, heads: int, n_tokens: int, n: int, layers: int) -> dict[int, np.ndarray]:
    """Valid keep answers per layer, each head's indices in a random (unsorted) order."""
    return {layer: np.stack([rng.permutation(rng.choice(n_tokens, n, replace=False)) for _ in range(heads)])
            for layer in range(layers)}


def test_the_digest_names_the_kept_set_of_every_layer():
    rng = np.random.default_rng(0)
    kept = {k: np.sort(v, axis=1) for k, v in _kept(rng, 4, 64, 10, 3).items()}
    same = {k: v.copy() for k, v in kept.items()}
    assert selection_digest(kept) == selection_digest(same)
    assert selection_digest(kept) == selection_digest(dict(reversed(list(kept.items()))))  # dict order: no matter
    one_index = {k: v.copy() for k, v in kept.items()}
    one_index[2][3, 0] = next(i for i in range(64) if i not in kept[2][3])
    swapped = {0: kept[1], 1: kept[0], 2: kept[2]}  # the same sets on other layers: another cache
    fewer = {k: v[:, :9] for k, v in kept.items()}  # a smaller budget's prefix
    other_head = {k: v.copy() for k, v in kept.items()}
    other_head[0] = other_head[0][[1, 0, 2, 3]]  # head 0's set on head 1: another cache
    shifted = {k + 1: v for k, v in kept.items()}  # the same arrays named as other layers
    digests = {selection_digest(d) for d in (kept, one_index, swapped, fewer, other_head, shifted)}
    assert len(digests) == 6


@pytest.fixture(scope="module")
def shared(tiny_model, tiny_rows):
    from cachecraft_lib.models.pipeline import make_pipeline
    from cachecraft_lib.models.prefill import SharedPrefill

    model, tok = tiny_model
    row = tiny_rows.iloc[0]
    ids = make_pipeline(model, tok).preprocess(row.context + row.question, [""], row.answer_prefix,
                                               max_context_length=10**9)
    return SharedPrefill(model, ids["context_ids"]), ids["questions_ids"][0]


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.6, 0.0])
def test_a_kept_cache_built_straight_equals_the_keep_press(tiny_model, shared, ratio):
    from kvpress.utils import compute_n_kept

    from cachecraft_lib.grid.decode import CacheRow

    model = tiny_model[0]
    prefill, question = shared
    _, _, keys, _, _ = prefill.layers[0]
    heads, n_tokens = keys.shape[1], keys.shape[2]
    n = compute_n_kept(n_tokens, ratio) if ratio else n_tokens
    answers = _kept(np.random.default_rng(int(ratio * 100)), heads, n_tokens, n, len(prefill.layers))
    press = KeptIndicesPress(submission=None, compression_ratio=ratio, answers=answers)
    reference = CacheRow.from_cache(model, prefill.cache_for(press), question, prefill.context_length, 32)
    fast = kept_cache_row(prefill, answers, ratio, question, prefill.context_length, 32)
    assert len(fast.keys) == len(reference.keys) == len(prefill.layers)
    for layer in range(len(prefill.layers)):
        assert torch.equal(fast.keys[layer], reference.keys[layer]), layer
        assert torch.equal(fast.values[layer], reference.values[layer]), layer
        assert fast.keys[layer].is_contiguous() and fast.keys[layer].shape[2] == n
    assert fast.masked == reference.masked == [None] * len(prefill.layers)
    assert torch.equal(fast.question_ids, reference.question_ids)
    assert (fast.start, fast.max_new_tokens, fast.tokenwise) == (reference.start, reference.max_new_tokens,
                                                                  reference.tokenwise)


def test_halving_screens_on_its_threads_and_gives_the_setting_back(monkeypatch):
    from types import SimpleNamespace

    from cachecraft_lib.search import halving

    seen: list[int] = []

    def screen(self, sources):
        seen.append(torch.get_num_threads())
        if sources:
            raise RuntimeError("a failing screen")
        return []

    monkeypatch.setattr(halving.Halving, "_screen", screen)
    h = object.__new__(halving.Halving)
    h.fit, h.threads = SimpleNamespace(runner=SimpleNamespace(close=lambda: None)), halving.THREADS
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert h.screen([]) == []
        with pytest.raises(RuntimeError):
            h.screen(["x"])
        assert torch.get_num_threads() == 2
        h.threads = None  # as set
        h.screen([])
    finally:
        torch.set_num_threads(before)
    assert seen == [halving.THREADS, halving.THREADS, 2] and halving.THREADS == 1
