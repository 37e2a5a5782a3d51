"""A plan's pass criteria are data in the plan (hashed with it) and are read as verdicts, one row per criterion
(issue 56, item 4): met, not met, or inconclusive when the intervals allow both. Synthetic seed pools only."""

from __future__ import annotations

import pandas as pd
import pytest
from test_preregister_comparators import _plan

from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search import plan_criteria as pc
from cachecraft_lib.search import preregister
from cachecraft_lib.search.seed_pool import SeedPool
from cachecraft_lib.stats.two_level import RunGain


def _pool(per_seed: list[tuple[float, float]], run: tuple[float, float] | None = None, seeds: int = 5) -> SeedPool:
    rows = pd.DataFrame([{"random_seed": i, "name": f"s{i}", "gain": (lo + hi) / 2, "lo": lo, "hi": hi,
                          "beats": lo > 0.005} for i, (lo, hi) in enumerate(per_seed)])
    gain = None if run is None else RunGain(sum(run) / 2, run[0], run[1], seeds, 96, seeds >= 2)
    return SeedPool("x", rows, 0.0, 0.0, 0.0, 0.005, gain)


def _verdicts(board: str, pools: dict, seeds: int = 5) -> dict[str, str]:
    return {j.criterion: j.verdict for j in pc.judge(pc.issue56(board, seeds, 0.005), pools)}


def test_the_criteria_are_in_the_plan_and_its_hash(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    crit = pc.issue56("A", 5, 0.005)
    event = preregister.record_plan(ledger, _plan(criteria=crit))
    stored = ledger.events()[0]["payload"]["criteria"]
    assert pc.from_payload(stored) == crit and preregister.plan_hash(event["payload"]) == event["payload"]["plan_hash"]
    first = stored[0]
    assert (first["against"], first["level"], first["margin"], first["required"]) == ("frc", pc.PER_SEED, -0.02, 4)
    looser = (pc.Criterion(crit[0].name, "frc", pc.PER_SEED, -0.05, 4), *crit[1:])
    assert _plan(criteria=looser).digest() != _plan(criteria=crit).digest()  # a margin changed is another plan


def test_board_a_seeds_non_inferior_reads_the_minus_002_margin():
    frc = [(-0.015, 0.03)] * 4 + [(-0.2, -0.1)]  # four lower bounds above -0.02, one seed clearly worse
    got = _verdicts("A", {"frc": _pool(frc, (-0.008, 0.02))})
    assert got["A: seeds non-inferior to FRC"] == pc.MET and got["A: a run non-inferior to FRC"] == pc.MET
    # lower bounds at -0.03: below the margin (a criterion ignoring it, or reading 0 or -0.05, decides otherwise)
    near = [(-0.03, 0.01)] * 4 + [(-0.2, -0.1)]
    assert _verdicts("A", {"frc": _pool(near, (-0.02, 0.01))})["A: seeds non-inferior to FRC"] == pc.INCONCLUSIVE
    worse = [(-0.03, -0.025)] * 2 + [(-0.015, 0.03)] * 3  # two upper bounds below -0.02: 4 of 5 cannot be reached
    assert _verdicts("A", {"frc": _pool(worse)})["A: seeds non-inferior to FRC"] == pc.NOT_MET
    loose = [(-0.045, 0.0)] * 5  # above -0.05, below -0.02: not non-inferior at the plan's margin
    assert _verdicts("A", {"frc": _pool(loose)})["A: seeds non-inferior to FRC"] == pc.INCONCLUSIVE


def test_a_run_verdict_reads_its_own_margin_and_one_seed_is_inconclusive():
    assert _verdicts("A", {"frc": _pool([(0, 1)] * 5, (-0.012, 0.02))})["A: a run non-inferior to FRC"] == pc.INCONCLUSIVE
    assert _verdicts("A", {"frc": _pool([(0, 1)] * 5, (-0.09, -0.02))})["A: a run non-inferior to FRC"] == pc.NOT_MET
    one = _pool([(0.1, 0.2)], (0.1, 0.2), seeds=1)
    assert _verdicts("A", {"frc": one}, seeds=1)["A: a run non-inferior to FRC"] == pc.INCONCLUSIVE


def test_b_offline_needs_every_seed_to_beat_the_best_baseline_and_the_controls_need_a_run_above_zero():
    bar = preregister.SELECTION_BEST
    all_beat = _pool([(0.01, 0.05)] * 5)
    one_short = _pool([(0.01, 0.05)] * 4 + [(-0.01, 0.03)])
    assert _verdicts("B_offline", {bar: all_beat})["B_offline: every seed beats the best baseline"] == pc.MET
    assert _verdicts("B_offline", {bar: one_short})["B_offline: every seed beats the best baseline"] == pc.INCONCLUSIVE
    pools = {preregister.RANDOM_CONTROL: _pool([(0, 1)] * 5, (0.01, 0.04)),
             preregister.SEED_CONTROL: _pool([(0, 1)] * 5, (-0.04, -0.01))}
    got = _verdicts("B_offline", pools)
    assert got["a run beats random search"] == pc.MET and got["a run beats its seed program"] == pc.NOT_MET


def test_a_criterion_without_its_comparison_is_inconclusive_not_passed():
    judged = pc.judge(pc.issue56("A", 5, 0.005), {})
    assert [j.verdict for j in judged] == [pc.INCONCLUSIVE] * 4 and all("no test rows" in j.evidence for j in judged)


@pytest.mark.parametrize(("seeds", "required"), [(5, 4), (2, 2), (10, 8), (1, 1)])
def test_four_of_five_is_the_same_share_of_other_seed_counts(seeds, required):
    assert pc.issue56("A", seeds, 0.005)[0].required == required
