"""One-seed plans are no new chances (second red team, 2026-12-05): the family of a claim is its author, board,
seed program and round over all random seeds; its first plan fixes the seeds (``plan_looks.first_of_family``),
a claim under a later plan of the family for a seed the first did not register fails, and the site's table of
looks per plan shows the family's total over its seeds, flagged above the first plan's seed count."""

from __future__ import annotations

from test_search_arena_claims import OWNER, _enter, _origin, _plan

from cachecraft_lib.arena.scoring import leaderboard
from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.site.pages import plan_looks_section


def _five_one_seed_plans(ledger: Ledger) -> list[tuple[dict, dict]]:
    """The red team's attack: five plans with one random seed each, each run and entered (one look apiece)."""
    out = []
    for seed in range(5):
        plan = _plan(ledger, random_seeds=[seed], notes=f"plan {seed}")
        out.append((plan, _enter(ledger, OWNER, f"H_{seed}", _origin(plan, seed))))
    return out


def test_a_claim_under_a_later_one_seed_plan_of_the_family_fails(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    entries = _five_one_seed_plans(ledger)
    events = ledger.events()
    assert claim_verdict(events, entries[0][1]).holds  # the first plan's seed: its one look
    first = entries[0][0]["payload"]["plan_hash"][:16]
    for _, entry in entries[1:]:
        verdict = claim_verdict(events, entry)
        assert verdict.looks == 1 and not verdict.holds  # one look apiece: the count alone saw nothing
        assert "not registered by the first plan of its family" in verdict.reason and first in verdict.reason


def test_another_round_author_or_seed_program_is_another_family(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    _plan(ledger, random_seeds=[0])
    later = _plan(ledger, random_seeds=[0, 7], notes="a second plan of the family")  # seed 0: the family's
    entry = _enter(ledger, OWNER, "H_0", _origin(later, 0))
    assert claim_verdict(ledger.events(), entry).holds
    others = [({"round_": 2}, OWNER, 7), ({"author": "carol"}, "carol", 8),
              ({"seed_program": "v5", "seed_source": "def f():\n    return 5\n"}, OWNER, 9)]
    for kw, author, seed in others:  # seeds the round-1 family's first plan did not register: another family's
        plan = _plan(ledger, random_seeds=[seed], **kw)
        origin = {**_origin(plan, seed), "seed": plan["payload"]["seed_program"]}
        entry = _enter(ledger, author, f"H_{author}_{plan['seq']}", origin, round_=plan["payload"]["round"])
        verdict = claim_verdict(ledger.events(), entry)
        assert verdict.holds, (kw, verdict.reason)


def test_the_site_shows_the_familys_looks_over_its_seeds_flagged_above_the_first_plans(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    _five_one_seed_plans(ledger)
    table = leaderboard.test_looks_by_plan(ledger.events())
    plans = table[table.plan != leaderboard.NO_PLAN]
    assert len(plans) == 5 and (plans.looks == 1).all() and (plans.family_looks == 1).all()  # per seed: one each
    assert (plans.family_total == 5).all() and (plans.family_seeds == 1).all()
    html = plan_looks_section(ledger.events(), "A")
    assert html.count("5 / 1") == 5 and "MORE LOOKS THAN ITS FIRST PLAN" in html

    honest = Ledger(tmp_path / "honest" / "ledger.jsonl")  # one plan, five seeds, five looks: as registered
    plan = _plan(honest, random_seeds=list(range(5)))
    for seed in range(5):
        _enter(honest, OWNER, f"H_{seed}", _origin(plan, seed))
    html = plan_looks_section(honest.events(), "A")
    assert html.count("5 / 5") == 5 and "MORE LOOKS THAN ITS FIRST PLAN" not in html


def test_the_first_plans_claim_fails_after_its_familys_looks_under_later_plans_seeds(tmp_path):
    """The attack in another order: the later one-seed plans are entered first. Their looks are the plan author's
    looks on the board and round between the first plan and its entry (``seed_entries.peeks_between``), so the
    first plan's claim fails too, naming them (it held with a note before the third red team)."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plans = [_plan(ledger, random_seeds=[seed], notes=f"plan {seed}") for seed in range(5)]
    looks = [_enter(ledger, OWNER, f"H_{seed}", _origin(plans[seed], seed))["seq"] - 1 for seed in range(1, 5)]
    entry = _enter(ledger, OWNER, "H_0", _origin(plans[0], 0))
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 1
    assert f"had 4 other test look(s) on board A, round 1 after the plan and before this entry (seqs {looks})" \
        in verdict.reason
