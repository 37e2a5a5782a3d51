"""The baselines re-implemented as arena submissions keep the same entries as their KVPress presses on real
layers of the embedded tiny model (the interface can express them), and the calibration table rates them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from kvpress import AdaKVPress, KnormPress, SnapKVPress, StreamingLLMPress, TOVAPress

from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes, submission_press
from cachecraft_lib.models.prefill import SharedPrefill

EXAMPLES = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "baselines"
PRESSES = {"snapkv": SnapKVPress, "tova": TOVAPress, "knorm": KnormPress, "streaming_llm": StreamingLLMPress}
MASKED = {"adasnapkv": lambda ratio: AdaKVPress(SnapKVPress(ratio))}  # head-adaptive: evicted keys masked


@pytest.fixture(scope="module")
def prefill():
    from cachecraft_lib.models.loading import load_model

    model, tokenizer = load_model("tiny", device="cpu", dtype="float32")
    text = ("The launch code for the north gate is 4417. Maria keeps the ledger in the blue room. " * 12)
    ids = tokenizer(text, return_tensors="pt").input_ids[:, :240]
    yield SharedPrefill(model, ids)
    close_sandboxes()


def kept_sets(layer, full) -> list[set[int]]:
    """Per batch row and KV head, the indices of the full cache's entries this layer kept (matched exactly)."""
    out = []
    for b in range(layer.keys.shape[0]):
        for h in range(layer.keys.shape[1]):
            same = (layer.keys[b, h][:, None, :] == full.keys[b, h][None]).all(-1)
            assert bool(same.any(-1).all()), "a kept key is no entry of the full cache"
            out.append({int(i) for i in same.float().argmax(-1)})
    return out


def test_every_expressible_baseline_has_an_example():
    assert sorted(p.name for p in EXAMPLES.iterdir() if (p / "method.py").is_file()) == sorted({**PRESSES, **MASKED})


@pytest.mark.parametrize("name", sorted(PRESSES))
@pytest.mark.parametrize("ratio", [0.5, 0.9])
def test_example_keeps_what_its_press_keeps(prefill, name, ratio):
    sub = load_submission(EXAMPLES / name)
    full = prefill.cache_for(None)
    scores = prefill.scores_for(PRESSES[name](ratio))
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6)
               for a, b in zip(prefill.scores_for(submission_press(sub, ratio)), scores, strict=True))
    ours = prefill.cache_for(submission_press(sub, ratio))
    ref = prefill.cache_for(PRESSES[name](ratio))
    assert len(ours.layers) == len(ref.layers) == len(full.layers) > 1
    budget = int(240 * (1 - ratio))
    for x, y, f, s in zip(ours.layers, ref.layers, full.layers, scores, strict=True):
        assert x.keys.shape == y.keys.shape and x.keys.shape[2] == budget
        for mine, theirs, row in zip(kept_sets(x, f), kept_sets(y, f), s.reshape(-1, s.shape[-1]), strict=True):
            # the same entries, but for exact ties at the budget's edge (K-norm at layer 0: RoPE keeps a repeated
            # token's norm, so its copies tie and float rounding picks one); KVPress's top-k order is not compared
            edge = row.topk(budget).values[-1]
            assert all(abs(float(row[i] - edge)) <= 1e-5 * max(1.0, abs(float(edge))) for i in mine ^ theirs)


def masks(prefill, press) -> list[torch.Tensor]:
    """Per layer, the (H_kv, L) entries a head-adaptive press masks (evicts) on the shared prefill."""
    from cachecraft_lib.grid.decode import _head_mask

    cache = prefill.cache_for(press)
    out = [_head_mask(prefill.model.model.layers[i].self_attn, cache.layers[i].keys) for i in range(len(cache.layers))]
    prefill.clear_masks(prefill.model)
    return out


@pytest.mark.parametrize("ratio", [0.5, 0.9])
def test_adasnapkv_masks_what_its_press_masks(prefill, ratio):
    sub = load_submission(EXAMPLES / "adasnapkv")
    assert sub.allocation == "head_adaptive" and sub.returns == "scores"
    ours, ref = masks(prefill, submission_press(sub, ratio)), masks(prefill, MASKED["adasnapkv"](ratio))
    assert len(ours) == len(ref) > 1
    budget = int(240 * (1 - ratio))
    for mine, theirs in zip(ours, ref, strict=True):
        assert mine is not None and theirs is not None
        heads = mine.shape[0]
        assert int((~theirs).sum()) == budget * heads  # the layer's budget, pooled over its heads
        kept = (~mine).sum(-1)
        assert kept.max() > kept.min()  # the allocation is not uniform: heads keep different numbers
        assert torch.equal(mine, theirs)


def test_anonymised_entries_name_nothing(tmp_path):
    from cachecraft_lib.arena.judges.calibration import SOURCE, anonymise, sources
    from cachecraft_lib.arena.judges.references import PUBLISHED

    for n, name in enumerate(sorted(SOURCE), start=1):
        folder = anonymise(EXAMPLES / name, tmp_path / name, n)
        text = " ".join((folder / f).read_text() for f in ("method.py", "metadata.yaml", "DESCRIPTION.md"))
        aliases = sum((PUBLISHED[m][0] for m in sources(SOURCE[name])), ()) + (name,)
        assert not any(a.lower() in text.lower() for a in aliases), f"{name}'s entry still names its source"
        sub = load_submission(folder)
        assert sub.returns == "scores"  # still a valid submission, allocated as the original
        assert sub.allocation == load_submission(EXAMPLES / name).allocation


def test_calibration_rates_every_baseline_novelty_at_most_one_and_names_its_source():
    from cachecraft_lib.arena.judges.calibration import SOURCE, calibration_table

    table = calibration_table()
    assert sorted(table.baseline) == sorted(SOURCE)
    assert (table.novelty <= 1).all() and table.right_source.all() and table.passes.all()
    assert (table.named == table.source).all()
