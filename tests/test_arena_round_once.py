"""``Arena.submit`` checks the round's secret once (issue 59, item 4): the check (strength, and the commitment once
the round exists) makes a ``Round``, the value every later step takes instead of a (secret, round) pair. The
model's runs are replaced by made-up rows (the scoring, gate, recording and ledger are the real ones), so this
counts the checks in seconds."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena import arena as arena_module
from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring import rounds
from cachecraft_lib.arena.scoring.rounds import Round
from cachecraft_lib.methods.registry import NO_PRESS

GOOD = Path(__file__).parent / "assets" / "arena" / "good_scores"
SECRET = hashlib.sha256(b"cachecraft tests: round once").hexdigest().encode()


def _items(board, split, secret=None, round_=1) -> pd.DataFrame:
    n = 4
    return pd.DataFrame({"item": range(n * len(board.tasks)), "context_id": [f"{split}{i}" for i in range(n * len(
        board.tasks))], "task": [t for t in board.tasks for _ in range(n)], "length": 512})


def _rows(board, items: pd.DataFrame, contenders) -> pd.DataFrame:
    """Rows as the board runner writes them: the full cache and each contender on every item and budget."""
    rng = np.random.default_rng(len(contenders))
    rows = []
    for name in [NO_PRESS, *(c.name for c in contenders if c.name != NO_PRESS)]:
        for budget in board.budgets:
            keep = 1.0 if name == NO_PRESS else budget
            for item in items.itertuples():
                rows.append({"method": name, "budget": budget, "item": item.item, "context_id": item.context_id,
                             "task": item.task, "length": item.length, "score": float(rng.uniform(60, 100)),
                             "logical_entries": 100 * keep, "physical_entries": 100 * keep, "full_entries": 100,
                             "read_entries": 100 * keep, "full_read_entries": 100, "overhead_flops": 0.0,
                             "prefill_flops": 1.0, "kv_bytes": 1, "full_kv_bytes": 1, "predicted_answer": ""})
    return pd.DataFrame(rows)


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A smoke arena whose runs are made up, and counters of every look at the secret."""
    calls = {"strength": 0, "commitment": 0, "behaviour": [], "test_items": []}
    check, verify = splits.check_secret, splits.verify_reveal

    def counting_check(*args, **kwargs):
        calls["strength"] += 1
        return check(*args, **kwargs)

    def counting_verify(*args, **kwargs):
        calls["commitment"] += 1
        return verify(*args, **kwargs)

    def items(self, board, split, secret=None, round_=1):
        if split == "test":
            calls["test_items"].append(type(secret).__name__)
        return _items(board, split)

    def behaviour(self, board, sub, secret, round_=1, **limits):
        calls["behaviour"].append(type(secret).__name__)
        return {}

    monkeypatch.setattr(splits, "check_secret", counting_check)
    monkeypatch.setattr(splits, "verify_reveal", counting_verify)
    monkeypatch.setattr(arena_module, "plan", lambda weak_ok: None)  # no sandbox needed: nothing runs
    monkeypatch.setattr(Arena, "items", items)
    monkeypatch.setattr(Arena, "behaviour", behaviour)
    monkeypatch.setattr(Arena, "run", lambda self, board, items, contenders: _rows(board, items, contenders))
    return Arena("smoke", tmp_path / "arena", progress=False), calls


def test_a_submit_checks_the_round_once_and_passes_the_round_on(counted, tmp_path):
    arena, calls = counted
    entry = arena.submit(GOOD, "A", SECRET)  # a new round: the strength checked, the commitment recorded
    assert not getattr(entry, "rejected", False), entry
    assert (calls["strength"], calls["commitment"]) == (1, 0)
    assert calls["behaviour"] == ["Round"] and set(calls["test_items"]) == {"Round"}
    calls.update(strength=0, commitment=0)
    arena.submit(GOOD, "A", SECRET)  # the round exists: one strength check, one commitment check
    assert (calls["strength"], calls["commitment"]) == (1, 1)


def test_a_wrong_secret_is_refused_before_anything_runs(counted):
    arena, calls = counted
    arena.submit(GOOD, "A", SECRET)
    runs = len(calls["test_items"])
    with pytest.raises(splits.SecretMismatch):
        arena.submit(GOOD, "A", hashlib.sha256(b"another secret").hexdigest().encode())
    assert len(calls["test_items"]) == runs


def test_a_round_hides_its_secret_and_a_round_recorded_meanwhile_must_match(tmp_path):
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    opened = arena.open_round(SECRET, 1)
    assert opened.payload is None and SECRET.decode() not in repr(opened)
    other = Arena("smoke", tmp_path / "arena", progress=False)
    other.ensure_round(hashlib.sha256(b"the other organiser").hexdigest().encode(), 1)  # recorded meanwhile
    with pytest.raises(splits.SecretMismatch, match="meanwhile"):
        rounds.recorded(arena.ledger, opened, "smoke")
    assert isinstance(arena.open_round(opened), Round) and arena.open_round(opened) is opened


def test_arena_baselines_checks_the_secret_once_for_every_board(counted, tmp_path, monkeypatch, capsys):
    """`cachecraft arena baselines` over all four smoke boards: the secret read (one strength check) and the
    round opened once (one more), not once per board."""
    from cachecraft_lib.cli import main

    _, calls = counted
    monkeypatch.setenv("CACHECRAFT_ARENA_SECRET", SECRET.decode())
    root = tmp_path / "cli"
    assert main(["arena", "baselines", "--profile", "smoke", "--root", str(root)]) == 0
    assert calls["strength"] == 2 and set(calls["test_items"]) == {"Round"} and len(calls["test_items"]) == 4
    assert capsys.readouterr().out.count("board ") == 4
