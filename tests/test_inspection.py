"""What a scorer press keeps of a needle: the indices must be exactly the ones KVPress keeps."""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib import ruler
from cachecraft_lib.models.loading import load_model
from cachecraft_lib.models.prefill import SharedPrefill
from cachecraft_lib.report.inspection import context_ids, scorer_kept_by_layer, scorer_needle_kept


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


@pytest.fixture(scope="module")
def sample(tiny):
    return ruler.load(1024, tiny[1], source="offline", samples_per_task=1, seed=7, tasks=["niah_single_2"])


def test_scorer_kept_positions_are_what_kvpress_keeps(tiny, sample):
    from kvpress import SnapKVPress

    model, tok = tiny
    context = sample.iloc[0].context
    kept = scorer_kept_by_layer(model, tok, context, SnapKVPress(compression_ratio=0.25))
    shared = SharedPrefill(model, context_ids(tok, context))
    cache = shared.cache_for(SnapKVPress(compression_ratio=0.25))
    assert len(kept) == len(shared.layers) == model.config.num_hidden_layers
    for layer, (idx, (_, _, keys, _, _)) in enumerate(zip(kept, shared.layers, strict=True)):
        compressed = cache.layers[layer].keys[0]
        assert idx.shape == compressed.shape[:2] and idx.shape[1] == int(keys.shape[2] * 0.75)
        for h in range(idx.shape[0]):  # the keys at our positions are the compressed cache's keys
            assert torch.allclose(keys[0, h, idx[h]], compressed[h])


def test_needle_kept_reports_a_share_per_sample_and_layer(tiny, sample):
    from kvpress import SnapKVPress

    from cachecraft_lib.methods.registry import FRCPress

    model, tok = tiny
    table = scorer_needle_kept(model, tok, sample, SnapKVPress(compression_ratio=0.25))
    assert len(table) == model.config.num_hidden_layers and table.kept.between(0, 1).all()
    assert table.depth.between(0, 1).all() and set(table.task) == {"niah_single_2"}
    nothing = scorer_needle_kept(model, tok, sample, SnapKVPress(compression_ratio=0.0))  # keeps everything
    assert (nothing.kept == 1.0).all()
    with pytest.raises(TypeError, match="not a KVPress ScorerPress"):
        scorer_needle_kept(model, tok, sample, FRCPress(compression_ratio=0.5))
