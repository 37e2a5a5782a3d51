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
    """wherewhat_a on board A's dev items and, through the arena's submit path with notebook 07's public demo
    secret, on its test items in an arena folder of its own (the other methods: tests/test_arena_post_examples.py
    and notebook 07's smoke run)."""
    from cachecraft_lib.arena.arena import Arena

    demo = b"909b628237c7edbf7e55da110f8e540a7098dee6e03c29b7e1e3931efc380fc1"  # notebook 07's public secret
    arena = Arena("smoke", tmp_path / "dev", progress=False)
    table = post_methods_table(arena, secret=demo, test_root=tmp_path / "post", methods=["wherewhat_a"])
    row = table.set_index("method").loc["wherewhat_a"]
    assert row.board == row.post_board == "A" and row.lo <= row.overall <= row.hi and not math.isnan(row.gain_lo)
    assert row.gain_lo <= row.gain <= row.gain_hi and row.verdict in ("better", "worse", "inconclusive")
    assert row.best_baseline not in ("no_press", "random") and row.post_score == 0.812
    assert row.test_lo <= row.test_overall <= row.test_hi and row.test_gain_lo <= row.test_gain <= row.test_gain_hi
    assert row.test_verdict in ("better", "worse", "inconclusive")
    submitted = [e for e in Arena("smoke", tmp_path / "post").ledger.events() if e["kind"] == "submission"]
    assert [e["payload"]["name"] for e in submitted] == ["wherewhat-a"]  # its own ledger, the caller's untouched
    assert not (tmp_path / "dev" / "ledger.jsonl").exists()
    # the test baselines' rows are kept in memory, never on disk (they hold the hidden items' answers)
    assert not [p for p in tmp_path.rglob("*") if "rows" in p.parts]


def test_every_post_method_has_its_folder_and_board():
    from cachecraft_lib.arena.boards.boards import load_boards

    boards = load_boards("cpu")
    for method in POST_METHODS:
        sub = load_submission(EXAMPLES / method.name)
        assert method.board in sub.boards and method.board in boards
    spanvote = next(m for m in POST_METHODS if m.name == "spanvote")
    assert spanvote.post_board == "A" and boards[spanvote.board].allows_whole_cache  # where its hook runs
