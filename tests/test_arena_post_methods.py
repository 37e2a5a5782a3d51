"""The post's methods as example submissions: wherewhat_a is SnapKV times a per-entry factor of keys and values
(not SnapKV itself), and post_methods_table scores it on the dev items with intervals beside the post's numbers."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from cachecraft_lib.arena.post_methods import EXAMPLES, POST_METHODS, post_methods_table
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes, submission_press
from cachecraft_lib.models.prefill import SharedPrefill


def test_wherewhat_a_is_snapkv_times_a_query_free_factor():
    from cachecraft_lib.models.loading import load_model

    model, _ = load_model("tiny", device="cpu", dtype="float32")
    torch.manual_seed(0)
    prefill = SharedPrefill(model, torch.randint(10, 1000, (1, 200)))
    try:
        ww = prefill.scores_for(submission_press(load_submission(EXAMPLES / "wherewhat_a"), 0.8))
        snap = prefill.scores_for(submission_press(load_submission(EXAMPLES / "baselines" / "snapkv"), 0.8))
    finally:
        close_sandboxes()
    for a, b in zip(ww, snap, strict=True):
        ratio = a[..., :-64] / b[..., :-64]  # the window (last 64) is pinned above all in both
        assert torch.isfinite(ratio).all() and (ratio > 0).all()
        assert ratio.std() > 0.05  # the factor changes the ranking: not SnapKV under another name
        kept_ww, kept_snap = set(a[0, 0].topk(40).indices.tolist()), set(b[0, 0].topk(40).indices.tolist())
        assert kept_ww != kept_snap


def test_post_methods_table_on_the_smoke_boards(tmp_path: Path):
    from cachecraft_lib.arena.arena import Arena

    table = post_methods_table(Arena("smoke", tmp_path)).set_index("method")
    assert list(table.index) == [m.name for m in POST_METHODS]
    row = table.loc["wherewhat_a"]
    assert row.board == "A" and row.lo <= row.overall <= row.hi and not math.isnan(row.gain_lo)
    assert row.gain_lo <= row.gain <= row.gain_hi and row.verdict in ("better", "worse", "inconclusive")
    assert row.best_baseline not in ("no_press", "random") and row.post_score == 0.812
    for name in ("spanvote", "probevr", "kvprior"):
        assert table.loc[name].verdict.startswith(("not built", "board "))
