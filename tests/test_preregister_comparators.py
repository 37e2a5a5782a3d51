"""A plan names its comparators and controls before the run (issue 56, item 1c): recorded in the signed ledger,
bound by the plan's hash, and a plan without comparators is refused before anything is written."""

from __future__ import annotations

import dataclasses

import pytest

from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search import preregister, selection
from cachecraft_lib.search.seeds import seed_path


def _plan(**kw) -> preregister.Plan:
    args = dict(board="A", profile="smoke", seed_program="v1", seed_source=seed_path("v1").read_text(),
                generations=1, population=2, random_seeds=[0, 1, 2, 3, 4], structural=True,
                split_seed=selection.SPLIT_SEED, top_k=2, rule=selection.rule_text(), events=[])
    return preregister.make_plan(**{**args, **kw})


def test_a_plan_names_frc_the_selection_halfs_best_baseline_and_both_controls(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    event = preregister.record_plan(ledger, _plan())
    payload = ledger.events()[0]["payload"]
    assert payload["comparators"] == ["frc", preregister.SELECTION_BEST] == list(preregister.DEFAULT_COMPARATORS)
    assert payload["controls"] == [preregister.SEED_CONTROL, preregister.RANDOM_CONTROL]
    assert preregister.plan_hash(payload) == event["payload"]["plan_hash"]
    other = _plan(comparators=["frc"])  # another set of comparators is another plan
    assert other.digest() != _plan().digest()


@pytest.mark.parametrize("comparators", [(), [], None, [""], ["frc", "frc"]])
def test_a_plan_without_comparators_is_refused_with_a_clear_error(comparators):
    with pytest.raises(preregister.MissingComparators, match="must name its comparators before the run"):
        _plan(comparators=comparators)


def test_a_plan_without_comparators_is_not_recorded(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    bare = dataclasses.replace(_plan(), comparators=())
    with pytest.raises(preregister.MissingComparators):
        preregister.record_plan(ledger, bare)
    assert ledger.events() == []  # refused before anything was written


def test_an_unknown_control_is_refused_and_no_control_is_allowed_by_name():
    with pytest.raises(ValueError, match="unknown control"):
        _plan(controls=["hand-tuned FRC"])
    assert _plan(controls=[]).controls == ()  # a plan may run without controls, but then it says so: none named
