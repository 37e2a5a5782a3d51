"""An entry's public memory and speed figures carry no bit a method chose about the test items: a method that
keeps between 1 and ``budget`` entries per context to write a message (here the bits of a hidden pattern) gets
exactly the figures of one that keeps its budget, unit by unit (so the gate's per-unit values carry nothing
either); a key-masking press that holds more is still charged what it holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cachecraft_lib.arena.boards.boards import load_boards
from cachecraft_lib.arena.scoring import score
from cachecraft_lib.methods.registry import NO_PRESS

KV_PER_TOKEN = 24  # entries per token over layers and KV heads


def _rows(kept_of: dict[str, callable], keep: float = 0.5, contexts: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for c in range(contexts):
        length, question = int(rng.integers(900, 1100)), int(rng.integers(10, 30))
        full, full_read = length * KV_PER_TOKEN, (length + question) * KV_PER_TOKEN
        for method, kept in kept_of.items():
            logical, physical = kept(c, length, keep)
            rows.append({"method": method, "budget": keep, "item": f"i{c}", "context_id": f"c{c}",
                         "task": ("niah_single_1", "vt")[c % 2], "score": 100.0, "logical_entries": logical,
                         "physical_entries": physical, "full_entries": full,
                         "read_entries": physical + question * KV_PER_TOKEN, "full_read_entries": full_read,
                         "overhead_flops": 0, "prefill_flops": 1})
    return pd.DataFrame(rows)


def _exact(c: int, length: int, keep: float) -> tuple[int, int]:
    n = int(length * keep) * KV_PER_TOKEN
    return n, n


MESSAGE = np.random.default_rng(7).integers(0, 2, 12)  # what the coder "saw" on each test context


def _coder(c: int, length: int, keep: float) -> tuple[int, int]:
    """Keeps its budget, or a third of it, by the bit it wants to publish."""
    n = int(length * keep) * KV_PER_TOKEN // (3 if MESSAGE[c] else 1)
    return n, n


def _masking(c: int, length: int, keep: float) -> tuple[int, int]:
    return int(length * keep) * KV_PER_TOKEN, length * KV_PER_TOKEN  # masks keys in place: holds everything


def test_keeping_fewer_than_the_budget_publishes_nothing():
    board = load_boards("smoke")["A"]
    units = score.unit_values(_rows({NO_PRESS: lambda c, n, k: (n * KV_PER_TOKEN,) * 2, "exact": _exact,
                                     "coder": _coder, "masking": _masking}), board)
    by = {m: g.set_index("context_id").sort_index() for m, g in units.groupby("method")}
    for term in ("memory", "memory_physical", "speed", "overall"):
        assert np.array_equal(by["coder"][term].to_numpy(), by["exact"][term].to_numpy()), term
    assert np.allclose(by["exact"].memory, 0.5)  # the budget's own value, not int(L * keep) / L
    raw = 1 - _rows({"coder": _coder}).eval("logical_entries / full_entries")
    assert raw.nunique() > 1  # what the coder's figure would have carried
    assert np.allclose(by["masking"].memory_physical, 0.0)  # holding more is charged
    scores = score.method_scores(units)
    assert scores.loc["coder", "memory"] == scores.loc["exact", "memory"]
    assert scores.loc["coder", "speed"] == scores.loc["exact", "speed"]
