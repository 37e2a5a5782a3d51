"""Test looks counted per pre-registered plan, not only per author name (issue 49): the leaderboard's per-plan
view, the claim's verdict that states its looks, the site's table, old ledgers without the plan key. A real
signed ledger, no model."""

from __future__ import annotations

from cachecraft_lib.arena.arena import look_origin
from cachecraft_lib.arena.scoring import leaderboard
from cachecraft_lib.arena.scoring.claims import NOT_VERIFIED
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.site.pages import plan_looks_section
from cachecraft_lib.search import preregister, selection
from cachecraft_lib.search.seeds import seed_path


def _plan_event(ledger: Ledger) -> dict:
    plan = preregister.make_plan("A", "smoke", "v1", seed_path("v1").read_text(), 1, 2, [0, 1], True,
                                 selection.SPLIT_SEED, 2, selection.rule_text(), [])
    return preregister.record_plan(ledger, plan)


def _origin(prefix: str, random_seed: int) -> dict:
    return {"kind": "search", "seed": "v1", "random_seed": random_seed, "registration": "preregistered",
            "plan": prefix, "run_id": f"A_v1_{random_seed}-abc"}


def _look(ledger: Ledger, author: str, name: str, origin: dict | None) -> dict:
    """What ``Arena.submit`` appends before it runs an entry on the test items."""
    return ledger.append("test_look", {"board": "A", "round": 1, "author": author, "name": name, "program": name,
                                       **look_origin(origin)})


def test_a_look_carries_the_entrys_plan_run_and_seed_and_nothing_for_a_hand_made_entry():
    origin = {**_origin("ab" * 8, 3), "iterations": 7, "child_id": "c", "plan_hash": "ab" * 32}
    assert look_origin(origin) == {"plan": "ab" * 8, "plan_hash": "ab" * 32, "run_id": "A_v1_3-abc", "random_seed": 3}
    assert look_origin(None) == {} and look_origin({"kind": "search", "run_id": "r"}) == {"run_id": "r"}


def test_looks_spread_over_entry_names_are_counted_under_their_plan_and_others_looks_apart(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    prefix = _plan_event(ledger)["payload"]["plan_hash"][:16]  # recorded by cachecraft-search (make_plan's default)
    ledger.append("test_look", {"board": "A", "round": 1, "author": "baseline", "name": "snapkv"})  # no plan key
    _look(ledger, "cachecraft-search", "try-1", _origin(prefix, 0))
    _look(ledger, "CacheCraft-Search ", "try-2", _origin(prefix, 0))  # the same author, another entry name
    _look(ledger, "alice", "copied", _origin(prefix, 0))  # another author tagged the public plan: shown apart
    events = ledger.events()
    per_author = leaderboard.test_looks(events).set_index("author").looks.to_dict()
    assert per_author == {"baseline": 1, "cachecraft-search": 2, "alice": 1}
    by_plan = leaderboard.test_looks_by_plan(events)
    mine = by_plan[by_plan.plan == prefix].set_index("random_seed")
    assert mine.looks.to_dict() == {0: 2, 1: 0}  # per plan: seed 0 had two looks, seed 1 none (listed all the same)
    assert mine.foreign.to_dict() == {0: 1, 1: 0} and mine.loc[0, "names"] == "try-1, try-2"
    assert by_plan[by_plan.plan == leaderboard.NO_PLAN].looks.tolist() == [1]  # an old-style look: "no plan"
    page = plan_looks_section(events, "A")
    assert "Test looks per plan" in page and prefix in page and "MORE THAN ONE LOOK" in page
    assert "other authors, other programs: not counted" in page
    assert plan_looks_section(events, "B_offline") == ""


def test_a_ledger_written_before_looks_named_their_plan_stays_readable(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("test_look", {"board": "A", "round": 1, "author": "x", "name": "x", "program": "p"})
    by_plan = leaderboard.test_looks_by_plan(ledger.events())
    assert by_plan.plan.tolist() == [leaderboard.NO_PLAN] and by_plan.looks.tolist() == [1]
    assert plan_looks_section(ledger.events(), "A") == ""  # no plan anywhere: no per-plan table


def test_a_claim_states_its_looks_and_fails_with_a_second_look_of_its_plan_and_seed(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    prefix = _plan_event(ledger)["payload"]["plan_hash"][:16]
    _look(ledger, "cachecraft-search", "search-v1-0", _origin(prefix, 0))
    honest = ledger.append("submission", {"board": "A", "name": "search-v1-0", "author": "cachecraft-search",
                                          "code_sha256": "search-v1-0", "round": 1, "origin": _origin(prefix, 0)})
    verdict = preregister.claim_verdict(ledger.events(), honest)
    assert verdict.holds and verdict.looks == 1 and verdict.plan_looks == 1
    assert verdict.reason.startswith(NOT_VERIFIED) and not verdict.verified  # the ledger alone: not its run

    _look(ledger, "someone-else", "peek", _origin(prefix, 1))  # another author's look, another program: apart
    _look(ledger, "cachecraft-search", "search-v1-1-try", _origin(prefix, 1))  # the author's own second look
    _look(ledger, "cachecraft-search", "search-v1-1", _origin(prefix, 1))  # ... then the entry's
    second = ledger.append("submission", {"board": "A", "name": "search-v1-1", "author": "cachecraft-search",
                                          "code_sha256": "search-v1-1", "round": 1, "origin": _origin(prefix, 1)})
    events = ledger.events()
    verdict = preregister.claim_verdict(events, second)
    assert not verdict.holds and verdict.looks == 2 and verdict.plan_looks == 4 and "one per seed" in verdict.reason
    assert verdict.foreign_looks == 1
    assert not preregister.claim_holds(events, second)
    assert preregister.claim_verdict(events, honest).holds  # seed 0's claim is unaffected by seed 1's looks


def test_a_claim_in_an_old_ledger_holds_with_zero_tagged_looks(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    prefix = _plan_event(ledger)["payload"]["plan_hash"][:16]
    _look(ledger, "cachecraft-search", "search-v1-0", None)  # written before looks carried the plan
    entry = ledger.append("submission", {"board": "A", "name": "search-v1-0", "author": "cachecraft-search",
                                         "origin": _origin(prefix, 0)})
    verdict = preregister.claim_verdict(ledger.events(), entry)
    assert verdict.holds and verdict.looks == 0 and "old ledger" in verdict.reason
