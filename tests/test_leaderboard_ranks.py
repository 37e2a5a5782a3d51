"""Arena leaderboard ranks are ranges: shared wherever the interval of a difference includes 0."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cachecraft_lib.arena.scoring import leaderboard
from cachecraft_lib.stats.intervals import Interval, rank_range


def _entry(name: str, overall: float, half: float = 0.05, eligible: bool = True) -> dict:
    return {"kind": "submission", "payload": {"board": "A", "name": name, "author": name, "round": 1,
                                               "overall": overall, "lo": overall - half, "hi": overall + half,
                                               "eligible": eligible}}


def _units(means: dict[str, float], noise: dict[str, float], n: int = 40) -> dict[str, pd.DataFrame]:
    """Per-unit values sharing each unit's difficulty, so paired differences are far tighter than the scores."""
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 0.2, n)
    return {m: pd.DataFrame({"context_id": [f"c{i}" for i in range(n)], "task": ["t1", "t2"] * (n // 2),
                             "overall": mu + difficulty + rng.normal(0, noise[m], n)}) for m, mu in means.items()}


def test_rank_range_shares_a_rank_when_the_difference_includes_zero():
    assert rank_range({"b": Interval(0.1, -0.1, 0.3, 10), "c": Interval(0.5, 0.3, 0.7, 10)}) == (1, 2, ["b"])
    assert rank_range({"b": Interval(-0.5, -0.7, -0.3, 10)}) == (2, 2, [])


def test_overlapping_entries_share_a_rank_and_a_clear_gap_does_not():
    means = {"mine": 0.61, "snapkv": 0.61, "knorm": 0.40}
    units = _units(means, {"mine": 0.03, "snapkv": 0.03, "knorm": 0.03})
    events = [_entry(m, float(u.overall.mean())) for m, u in units.items()]
    table = leaderboard.leaderboard(events, units=lambda board, name: units[name])
    ranks = dict(zip(table.name, table.rank_range, strict=True))
    assert ranks["mine"] == ranks["snapkv"] == "1-2" and ranks["knorm"] == "3"
    assert set(table.rank_basis) == {"paired difference over test units"}
    assert table.set_index("name").loc["mine", "shares_rank_with"] == "snapkv"
    assert sorted(table["rank"]) == [1, 2, 3]  # the point order stays beside the range


def test_pairing_resolves_what_the_overall_intervals_cannot():
    """0.64 vs 0.60 with wide overall intervals (shared difficulty) but a tight paired difference."""
    units = _units({"mine": 0.64, "snapkv": 0.60}, {"mine": 0.01, "snapkv": 0.01})
    events = [_entry("mine", 0.64, half=0.08), _entry("snapkv", 0.60, half=0.08)]
    paired = leaderboard.leaderboard(events, units=lambda b, n: units[n])
    assert paired.rank_range.tolist() == ["1", "2"]
    overlap = leaderboard.leaderboard(events)  # no units: the overall intervals overlap, the rank is shared
    assert overlap.rank_range.tolist() == ["1-2", "1-2"]
    assert set(overlap.rank_basis) == {"overlap of overall intervals"}


def test_an_ineligible_entry_ranks_below_the_eligible_ones():
    events = [_entry("no_press", 0.9, eligible=False), _entry("a", 0.5), _entry("b", 0.52)]
    table = leaderboard.leaderboard(events)
    assert table.name.tolist() == ["b", "a", "no_press"] and table.rank_range.tolist() == ["1-2", "1-2", "3"]


def test_points_say_which_rule_awarded_them():
    events = [_entry("a", 0.5), {"kind": "points", "payload": {"board": "A", "name": "a", "points": 3.0,
                                                                 "rule": "frozen_bar"}}]
    assert leaderboard.leaderboard(events).points_rule.tolist() == ["frozen_bar"]


def test_units_loader_reads_each_entrys_own_file_by_its_ledger_id(tmp_path):
    """The harness keeps per-unit values under ledger ids (baseline-<name>, entry-<seq>); the loader finds the
    latest entry of a name, so an entry resubmitted under the same name is paired with its own units."""
    from cachecraft_lib.arena.scoring.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("baseline", {"board": "A", "name": "snapkv", "round": 1})
    ledger.append("submission", {"board": "A", "name": "mine", "round": 1})
    latest = ledger.append("submission", {"board": "A", "name": "mine", "round": 1})
    folder = tmp_path / "private" / "round1" / "A"
    folder.mkdir(parents=True)
    frames = {"baseline-snapkv": 0.1, "entry-1": 0.2, f"entry-{latest['seq']}": 0.3}
    for entry_id, value in frames.items():
        pd.DataFrame({"context_id": ["c0"], "overall": [value]}).to_parquet(folder / f"{entry_id}.parquet")
    load = leaderboard.units_loader(tmp_path)
    assert float(load("A", "snapkv").overall.iloc[0]) == 0.1
    assert float(load("A", "mine").overall.iloc[0]) == 0.3  # the latest entry's own file, not an earlier one's
    assert load("A", "nobody") is None and load("B", "mine") is None


def test_an_entry_recorded_without_an_interval_shares_every_rank_it_could_hold():
    events = [_entry("a", 0.8, half=0.01), _entry("b", 0.5, half=0.01)]
    events.append({"kind": "submission", "payload": {"board": "A", "name": "c", "author": "c", "round": 1,
                                                      "overall": 0.6, "eligible": True}})
    table = leaderboard.leaderboard(events).set_index("name")
    assert table.loc["a", "rank_range"] == "1-2" and table.loc["c", "rank_range"] == "1-3"
    assert table.loc["b", "rank_range"] == "2-3"


def test_pairs_with_per_unit_values_are_paired_even_when_another_entry_has_none():
    """One entry without per-unit values no longer sends the whole board back to interval overlap: the pairs
    that have them are ranked by their paired difference (table_arena_leaderboard's FRC alone at rank 1)."""
    units = _units({"mine": 0.64, "snapkv": 0.60}, {"mine": 0.01, "snapkv": 0.01})
    events = [_entry("mine", 0.64, half=0.08), _entry("snapkv", 0.60, half=0.08), _entry("old", 0.30, half=0.02)]
    table = leaderboard.leaderboard(events, units=lambda b, n: units.get(n)).set_index("name")
    assert table.loc["mine", "rank_range"] == "1" and table.loc["snapkv", "rank_range"] == "2"
    assert table.loc["old", "rank_basis"] == leaderboard.OVERLAP
    assert table.loc["mine", "rank_basis"].startswith(leaderboard.PAIRED) and "where both" in table.loc["mine",
                                                                                                        "rank_basis"]


def test_the_units_loader_finds_entries_recorded_after_it_was_made(tmp_path):
    from cachecraft_lib.arena.scoring.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("baseline", {"board": "A", "name": "snapkv", "round": 1})
    load = leaderboard.units_loader(tmp_path)  # made before the entry exists (notebook 07 made it early)
    event = ledger.append("submission", {"board": "A", "name": "late", "round": 1})
    folder = tmp_path / "private" / "round1" / "A"
    folder.mkdir(parents=True)
    pd.DataFrame({"context_id": ["c0"], "overall": [0.7]}).to_parquet(folder / f"entry-{event['seq']}.parquet")
    assert float(load("A", "late").overall.iloc[0]) == 0.7


def test_test_looks_are_counted_per_author():
    look = {"kind": "test_look", "payload": {"board": "A", "author": "Agent1", "program": "x", "round": 1}}
    other = {"kind": "test_look", "payload": {"board": "A", "author": "agent\u200b1", "program": "y", "round": 1}}
    events = [_entry("agent1", 0.5), look, other, {"kind": "test_look", "payload": {"board": "B", "author": "agent1"}}]
    table = leaderboard.leaderboard(events)
    assert table.test_looks.tolist() == [2]  # board A's two looks, one author however spelled
