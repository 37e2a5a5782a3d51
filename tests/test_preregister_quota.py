"""A pre-registered plan checks its author's rate-limit room for one entry per seed before it is recorded
(issue 56: five seeds are exactly the arena's 5 entries per 24 hours), so a run is never refused half-way; the
limit itself is unchanged."""

from __future__ import annotations

import pytest
from test_preregister_comparators import _plan

from cachecraft_lib.arena.scoring.ledger import RATE_LIMIT, Ledger, RateLimited
from cachecraft_lib.search import plan_quota, preregister


def _spend(ledger: Ledger, author: str, n: int) -> None:
    for i in range(n):
        ledger.append("rejection", {"author": author, "author_key": author, "name": f"try-{i}", "reason": "test"})


def test_a_plan_whose_author_lacks_room_for_every_seed_is_refused_before_it_is_recorded(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(random_seeds=[0, 1, 2, 3, 4])
    _spend(ledger, plan.author, 1)  # one counted event in the window: room for 4, the plan needs 5
    before = len(ledger.events())
    with pytest.raises(plan_quota.NoRoomForPlan, match="refused half-way"):
        preregister.record_plan(ledger, plan, reserve=True)
    assert len(ledger.events()) == before  # nothing written
    assert preregister.record_plan(ledger, _plan(random_seeds=[0, 1, 2, 3]), reserve=True)["kind"] == "plan"


def test_with_room_the_five_seeds_enter_and_the_limit_still_refuses_a_sixth(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(random_seeds=[0, 1, 2, 3, 4])
    preregister.record_plan(ledger, plan, reserve=True)  # a plan is no counted event
    assert plan_quota.entries_left(ledger, plan.author) == RATE_LIMIT == len(plan.random_seeds)
    _spend(ledger, plan.author, 5)
    with pytest.raises(RateLimited):  # the limit is not weakened: a sixth is still refused
        ledger.check_rate(plan.author)
    assert plan_quota.entries_left(ledger, "someone else") == RATE_LIMIT  # nor anyone else's room touched
