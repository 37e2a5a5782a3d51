"""A search entry's pre-registration claim against the red team's attacks (issue 49): a hand-made folder claiming a
public plan, untagged looks at the entered program, an entry on another round, plans that differ only in notes or
split seed, others' looks tagged with a plan, a random seed that crashed the site, an untagged entry in a tagged
ledger; and the claim checked against its run folder (``verify_claim``). A real signed ledger and hand-written run
folders, no model (the last test: the real ``Arena.submit``, slow)."""

from __future__ import annotations

import hashlib
import json
from argparse import Namespace
from pathlib import Path

import pandas as pd
import pytest
from test_search_preregister import _Fitness, _run

from cachecraft_lib.arena.arena import look_origin
from cachecraft_lib.arena.scoring import leaderboard
from cachecraft_lib.arena.scoring.claims import NOT_VERIFIED, claim_verdict
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.site.pages import claim_text, plan_looks_section
from cachecraft_lib.search import preregister, selection
from cachecraft_lib.search.preregister import verify_claim
from cachecraft_lib.search.seeds import seed_path
from cachecraft_lib.search.submit import converted_method, run_origin

OWNER = "cachecraft-search"


def _plan(ledger: Ledger, **kw) -> dict:
    args = dict(board="A", profile="smoke", seed_program="v1", seed_source=seed_path("v1").read_text(),
                generations=1, population=2, random_seeds=[0, 1], structural=True, split_seed=selection.SPLIT_SEED,
                top_k=3, rule=selection.rule_text(), events=ledger.events())
    return preregister.record_plan(ledger, preregister.make_plan(**{**args, **kw}))


def _origin(plan: dict, seed: int = 0, full: bool = True, **extra) -> dict:
    digest = plan["payload"]["plan_hash"]
    return {"kind": "search", "seed": "v1", "random_seed": seed, "registration": "preregistered",
            "plan": digest[:16], **({"plan_hash": digest} if full else {}), "run_id": "r", **extra}


def _look(ledger: Ledger, author: str, program: str, origin: dict | None = None, board: str = "A", round_: int = 1,
          **more) -> dict:
    return ledger.append("test_look", {"board": board, "round": round_, "author": author, "name": program,
                                       "program": program, **more, **look_origin(origin)})


def _enter(ledger: Ledger, author: str, program: str, origin: dict | None, round_: int = 1, **more) -> dict:
    """What ``Arena.submit`` appends: the look (tagged from the origin), then the entry."""
    _look(ledger, author, program, origin, round_=round_, **more)
    return ledger.append("submission", {"board": "A", "name": program, "author": author, "code_sha256": program,
                                        "round": round_, **({"origin": origin} if origin else {})})


def test_a_hand_made_entry_claiming_someone_elses_public_plan_fails_and_blocks_nothing(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    assert plan["payload"]["author"] == OWNER and plan["payload"]["author_key"] == OWNER
    forged = _enter(ledger, "mallory", "H_forged", _origin(plan, child_id="cand-none"))
    verdict = claim_verdict(ledger.events(), forged)
    assert not verdict.holds and "recorded by 'cachecraft-search'" in verdict.reason
    honest = _enter(ledger, OWNER, "H_selected", _origin(plan))
    verdict = claim_verdict(ledger.events(), honest)  # the forged entry pre-empts nothing
    assert verdict.holds and verdict.looks == 1 and verdict.foreign_looks == 1


def _selected_run(tmp_path: Path, ledger: Ledger, plan: dict) -> tuple[Path, str]:
    run = _run(tmp_path / "run")  # children a (0.9), b (0.5), c (0.7) on the search half
    preregister.write_plan_ref(run, plan)
    selection.select(run, _Fitness({"a": 0.1, "b": 0.6, "c": 0.8}), top_k=3)  # the rule picks c
    code = selection.read_selected(run)[1]
    return run, hashlib.sha256(converted_method(code, "c")).hexdigest()


def _shortlist_rewritten(run: Path) -> None:
    """The red team's n1: the author raises child a's selection-half score in the shortlist, points the selection
    at a and writes the digests afresh, so the folder's choice is the rule's on its (edited) shortlist."""
    folder = run / selection.SELECTED
    short = pd.read_csv(folder / "shortlist.csv")
    short.loc[short.child_id == "a", "selection_fitness"] = 0.95
    short["chosen"] = short.child_id == "a"
    short.to_csv(folder / "shortlist.csv", index=False)
    units = pd.DataFrame({"child_id": ["a", "c"], "context_id": ["x", "x"], "task": ["t", "t"],
                          "overall": [0.1, 0.8], "random_seed": [0, 0]})  # what a and c scored
    units.to_csv(folder / selection.UNITS_FILE, index=False)
    info = json.loads((folder / "selected.json").read_text())
    info.update(child_id="a", selection_fitness=0.95,
                shortlist_sha256=hashlib.sha256((folder / "shortlist.csv").read_bytes()).hexdigest(),
                selection_units_sha256=hashlib.sha256((folder / selection.UNITS_FILE).read_bytes()).hexdigest())
    (folder / "selected.json").write_text(json.dumps(info))


def test_a_rewritten_shortlist_is_caught_by_its_per_unit_values(tmp_path):
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger)
    run, _ = _selected_run(tmp_path, ledger, plan)
    _shortlist_rewritten(run)
    assert "not the means of its per-unit values" in selection.files_disagree(run)
    (run / selection.SELECTED / "shortlist.csv").write_text("edited after the digest\n")
    assert "digest" in selection.files_disagree(run)


@pytest.mark.parametrize("case", ["honest", "another child", "another program", "selection edited", "another plan",
                                  "per-unit values disagree"])
def test_a_claim_is_verified_against_its_run(tmp_path, case):
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger)
    run, sha = _selected_run(tmp_path, ledger, plan)
    # another plan of the family may only claim a seed its first plan registered (test_claims_family): seed 1
    claimed = _plan(ledger, notes="another plan", random_seeds=[1]) if case == "another plan" else plan
    origin = _origin(claimed, seed=1 if case == "another plan" else 0, run_id=run_origin(run)["run_id"],
                     child_id="a" if case == "another child" else "c")
    entry = _enter(ledger, OWNER, "0" * 64 if case == "another program" else sha, origin)
    if case == "selection edited":
        (run / selection.SELECTED / "program.py").write_text(seed_path("v1").read_text() + "# edited\n")
    if case == "per-unit values disagree":  # c's per-unit values (digest rewritten) do not give its 0.8
        folder = run / selection.SELECTED
        pd.DataFrame({"child_id": ["a", "b", "c"], "context_id": "x", "task": "t", "overall": [0.1, 0.6, 0.3],
                      "random_seed": 0}).to_csv(folder / selection.UNITS_FILE, index=False)
        info = json.loads((folder / "selected.json").read_text())
        info["selection_units_sha256"] = hashlib.sha256((folder / selection.UNITS_FILE).read_bytes()).hexdigest()
        (folder / "selected.json").write_text(json.dumps(info))
    events = ledger.events()
    assert claim_verdict(events, entry).holds and NOT_VERIFIED in claim_verdict(events, entry).reason
    verdict = verify_claim(events, entry, run)
    assert verdict.holds is verdict.verified is (case == "honest"), verdict.reason
    if case == "honest":
        assert "verified against its run" in verdict.reason and NOT_VERIFIED not in verdict.reason


def test_the_plan_fixes_the_search_contexts_the_run_climbed_on(tmp_path):
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger, search_contexts=["c2", "c1"])
    assert plan["payload"]["search_contexts_sha256"] == preregister.contexts_sha256(["c1", "c2"])
    run = _run(tmp_path / "run")
    preregister.write_plan_ref(run, plan)
    with pytest.raises(preregister.NotPreregistered, match="fitness_contexts.txt"):
        preregister.check_registration(ledger.events(), run)  # no file
    (run / "fitness_contexts.txt").write_text("c1\nc3\n")
    with pytest.raises(preregister.NotPreregistered, match="not the plan's"):
        preregister.check_registration(ledger.events(), run)
    (run / "fitness_contexts.txt").write_text("c1\nc2\n")
    assert preregister.check_registration(ledger.events(), run).label == preregister.PREREGISTERED


def test_untagged_looks_at_the_entered_program_count_whatever_their_author(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    for program in ("H_child1", "H_best"):  # exploratory peeks before the plan, under a throwaway name
        _look(ledger, "bob-alt", program)
    plan = _plan(ledger)  # truthfully names round 1's existing commitment
    entry = _enter(ledger, OWNER, "H_best", _origin(plan))
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2 and "one per seed" in verdict.reason
    assert verdict.round_looks_before_plan == 2

    fresh = Ledger(tmp_path / "fresh" / "ledger.jsonl")  # the same program re-entered under another docstring
    fresh.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(fresh, "other", "H_variant", program_ast="AST_1")
    plan = _plan(fresh)
    entry = _enter(fresh, OWNER, "H_best", _origin(plan), program_ast="AST_1")
    entry = fresh.append("submission", {**entry["payload"], "code_ast": "AST_1", "name": "again"})
    assert claim_verdict(fresh.events(), entry).looks >= 2
    clean = Ledger(tmp_path / "clean" / "ledger.jsonl")
    clean.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(clean, "x", "H_other")
    entry = _enter(clean, OWNER, "H_best", _origin(_plan(clean)))
    verdict = claim_verdict(clean.events(), entry)
    assert verdict.holds and "had 1 test look(s) on board A before the plan" in verdict.reason


def test_the_normalised_digest_ignores_comments_and_docstrings():
    from cachecraft_lib.arena.scoring.plan_looks import code_digest

    base = b"class Method:\n    def score(self, layer):\n        return layer\n"
    other = b'"""doc"""\nclass Method:\n    """x"""\n    def score(self, layer):  # why\n        return layer\n'
    assert code_digest(base) == code_digest(other) != code_digest(base.replace(b"return layer", b"return 1"))
    assert code_digest(b"def (") is None


def test_the_entry_must_be_on_the_plans_round_and_submit_search_refuses_another_round(tmp_path, capsys):
    from cachecraft_lib.cli.arena_submit_search import _registration

    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    ledger.append("round", {"round": 2, "commitment": "d00d" * 16, "salt": "s"})
    for program in ("H1", "H_best"):
        _look(ledger, "bob-alt", program, round_=2)
    plan = _plan(ledger)  # round 1, no commitment yet: true
    entry = _enter(ledger, OWNER, "H_best2", _origin(plan), round_=2)
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and "round 2, the plan names round 1" in verdict.reason
    run = _run(tmp_path / "run")
    preregister.write_plan_ref(run, plan)
    selection.select(run, _Fitness({"a": 0.1, "b": 0.6, "c": 0.8}), top_k=3)
    args = Namespace(exploratory=False, dev_only=False, top=1, round=2)
    assert _registration(args, ledger.events(), str(run)) is None
    assert "--round 2 is not the plan's round 1" in capsys.readouterr().err
    assert _registration(Namespace(**{**vars(args), "round": 1}), ledger.events(), str(run)) is not None


def test_plans_differing_only_in_notes_or_split_seed_are_one_family(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    first = _plan(ledger, notes="attempt 0")
    _enter(ledger, OWNER, "H_same", _origin(first))
    claims = []
    for kw in ({"notes": "attempt 1"}, {"split_seed": 4903}):
        plan = _plan(ledger, **kw)
        claims.append(_enter(ledger, OWNER, f"H_{len(claims)}", _origin(plan)))
    events = ledger.events()
    for entry in claims:
        verdict = claim_verdict(events, entry)
        assert not verdict.holds and verdict.family_looks >= 1 and "same family" in verdict.reason
    table = leaderboard.test_looks_by_plan(events)
    seed0 = table[table.random_seed == 0]
    assert seed0.family.nunique() == 1 and set(seed0.family_looks) == {3}
    assert "MORE THAN ONE LOOK IN ITS FAMILY (3)" in plan_looks_section(events, "A")
    other_seed = _plan(ledger, notes="attempt 3", random_seeds=[1, 7])  # the first plan's other seed: a fresh chance
    entry = _enter(ledger, OWNER, "H_seed1", _origin(other_seed, 1))
    assert claim_verdict(ledger.events(), entry).holds
    entry = _enter(ledger, OWNER, "H_7", _origin(other_seed, 7))  # a seed the first plan did not register: none
    assert "not registered by the first plan of its family" in claim_verdict(ledger.events(), entry).reason


def test_the_full_plan_hash_matches_exactly_and_a_prefix_still_reads(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    wrong = {**_origin(plan), "plan_hash": plan["payload"]["plan_hash"][:63] + "0"}  # the prefix alone would match
    entry = _enter(ledger, OWNER, "H_w", wrong)
    assert "no earlier, unaltered plan has this hash" in claim_verdict(ledger.events(), entry).reason
    old = Ledger(tmp_path / "old" / "ledger.jsonl")
    plan = _plan(old)
    entry = _enter(old, OWNER, "H", _origin(plan, full=False))
    assert claim_verdict(old.events(), entry).holds  # an origin naming its plan by 16 digits still reads


def test_others_looks_tagged_with_a_plan_fail_nobody_and_later_looks_are_labelled(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    _look(ledger, "mallory", "H_m", {"plan": plan["payload"]["plan_hash"][:16], "random_seed": 0},
          board="B_offline")  # another board: not this plan's test items
    _look(ledger, "mallory", "H_m2", _origin(plan))  # this board, another program, another author
    entry = _enter(ledger, OWNER, "H_sel", _origin(plan))
    _look(ledger, "anyone", "H_sel")  # the same program, after the entry
    events = ledger.events()
    verdict = claim_verdict(events, entry)
    assert verdict.holds and verdict.looks == 1 and verdict.foreign_looks == 1 and verdict.later_looks == 1
    row = leaderboard.test_looks_by_plan(events).query("board == 'A' and random_seed == 0").iloc[0]
    assert (row.looks, row.after, row.foreign) == (1, 1, 1)
    page = plan_looks_section(events, "A")
    assert "(after the entry)" in page and "MORE THAN ONE LOOK" not in page  # the site and the claim agree
    assert "holds" in claim_text(events, entry) and NOT_VERIFIED in claim_text(events, entry)


def test_a_random_seed_out_of_bounds_is_refused_or_read_leniently(tmp_path):
    import argparse

    import yaml

    from cachecraft_lib.arena.submissions.metadata import metadata_origin
    from cachecraft_lib.cli.search_options import random_seed

    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump({"name": "x", "author": "y", "boards": ["A"], "origin": {
        "kind": "search", "random_seed": 2 ** 64, "plan": "f" * 16}}))
    assert "random_seed" not in metadata_origin(tmp_path)
    with pytest.raises(ValueError, match="2\\*\\*31"):
        _plan(Ledger(tmp_path / "l" / "ledger.jsonl"), random_seeds=[0, 2 ** 31])
    with pytest.raises(argparse.ArgumentTypeError):
        random_seed(str(2 ** 31))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    _enter(ledger, OWNER, "H", _origin(plan))
    ledger.append("test_look", {"board": "A", "round": 1, "author": "m", "name": "m", "program": "m",
                                "plan": "f" * 16, "random_seed": 2 ** 64})  # written before the bound
    table = leaderboard.test_looks_by_plan(ledger.events())  # no crash
    assert "not 0 <= s < 2**31" in " ".join(table.note)
    assert "Test looks per plan" in plan_looks_section(ledger.events(), "A")


def test_an_untagged_entry_in_a_ledger_whose_looks_carry_tags_fails(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    _enter(ledger, OWNER, "H0", _origin(plan, 0))  # a tagged look: this ledger is from after tags existed
    _look(ledger, OWNER, "H1")  # the entry's own look, without a tag
    entry = ledger.append("submission", {"board": "A", "name": "H1", "author": OWNER, "code_sha256": "H1",
                                         "round": 1, "origin": _origin(plan, 1)})
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and "carries no plan tag" in verdict.reason


@pytest.mark.parametrize("board", ["", "_B_offline"])
def test_the_committed_notebook_08_ledgers_hold_five_claims_with_one_look_each_and_their_controls(board):
    """Issue 56's committed rounds: five seeds of one plan, each entry's claim holds with one test look; the
    controls (the seed program, each seed's random-search pick) and the baselines are looked at too, outside the
    plan, so a reader sees every look that was taken."""
    path = Path(__file__).parents[1] / "figures" / "samples" / f"08_search_arena{board}_ledger.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    entries = [e for e in events if e["kind"] == "submission" and (e["payload"].get("origin") or {}).get("plan")]
    assert len(entries) == 5
    for entry in entries:
        verdict = claim_verdict(events, entry)
        assert verdict.holds and verdict.looks == 1, verdict.reason
        assert NOT_VERIFIED in verdict.reason
    table = leaderboard.test_looks_by_plan(events)
    planned = table[table.plan != leaderboard.NO_PLAN]
    assert planned.plan.nunique() == 1 and planned.looks.tolist() == [1] * 5
    others = ", ".join(table[table.plan == leaderboard.NO_PLAN].names)
    assert all(f"random-v1-{s}" in others for s in range(5)) and "seed-v1" in others and "frc" in others


@pytest.mark.slow
def test_a_claim_made_through_the_real_arena_submit(tmp_path):
    """The smoke arena: a hand-made folder by another author claiming the plan fails; the plan author's entry holds
    (not verified: no run), its look carrying the full plan hash, the normalised and behavioural digests and the
    behaviour sketch. The two programs keep other tokens (other weights): a twin doing the same, or nearly, would
    share the digest or a near sketch, and its look would count against the claim (test_behaviour_digest.py)."""
    import yaml

    from cachecraft_lib.arena.arena import Arena
    from cachecraft_lib.arena.scoring.behaviour_sketch import THRESHOLD, similarity
    from cachecraft_lib.arena.submissions.from_program import program_to_submission

    secret = hashlib.sha256(b"test_search_arena_claims").hexdigest().encode()
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    plan = _plan(arena.ledger, top_k=4, random_seeds=[0])
    verdicts = {}
    for author in ("mallory", OWNER):
        program = tmp_path / f"{author}.py"
        source = seed_path("v1").read_text()
        if author == "mallory":  # two programs that keep other tokens (0.6, 0.1, 0.1, 0.1, 0.1) keeps nearly the same:
            # one program by its sketch (estimated 0.92 on these contexts), and its look would count
            source = source.replace("WEIGHTS = (0.2, 0.2, 0.2, 0.2, 0.2)", "WEIGHTS = (1.0, 0.0, 0.0, 0.0, 0.0)")
        program.write_text(source + f"\nENTERED_BY = {author!r}\n")
        folder = program_to_submission(program, tmp_path / author, f"pick-{author[:4]}", author=author,
                                       boards=("A",)).folder
        meta = yaml.safe_load((folder / "metadata.yaml").read_text())
        meta["origin"] = _origin(plan, child_id="cand-none")
        (folder / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        assert not arena.submit(folder, "A", secret).get("rejected")
        events = arena.ledger.events()
        verdicts[author] = claim_verdict(events, [e for e in events if e["kind"] == "submission"][-1])
    assert not verdicts["mallory"].holds and "recorded by" in verdicts["mallory"].reason
    mine = verdicts[OWNER]
    assert mine.holds and mine.looks == 1 and NOT_VERIFIED in mine.reason, mine.reason
    theirs, look = [e["payload"] for e in arena.ledger.events() if e["kind"] == "test_look"][-2:]
    assert look["plan_hash"] == plan["payload"]["plan_hash"] and len(look["program_ast"]) == 64
    assert len(look["program_behaviour"]) == 64 and theirs["program_behaviour"] != look["program_behaviour"]
    assert similarity(theirs["program_sketch"], look["program_sketch"]) < THRESHOLD  # not near either


def test_two_seeds_of_one_plan_may_choose_the_same_program(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    first = _enter(ledger, OWNER, "H_same", _origin(plan, 0, run_id="r0"))
    second = _enter(ledger, OWNER, "H_same", _origin(plan, 1, run_id="r1"))  # two runs chose one program
    events = ledger.events()
    assert claim_verdict(events, first).holds and claim_verdict(events, second).holds
    assert claim_verdict(events, second).looks == 1
    third = _enter(ledger, "bob", "H_same", None)  # anyone else's look at it still counts (after the entries)
    assert claim_verdict(ledger.events(), second).later_looks == 1 and third


def test_submit_search_prints_the_claim_checked_against_its_run(tmp_path, capsys):
    from types import SimpleNamespace

    from cachecraft_lib.cli.arena_submit_search import print_claim

    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger)
    run, sha = _selected_run(tmp_path, ledger, plan)
    origin = _origin(plan, run_id=run_origin(run)["run_id"], child_id="c")
    _enter(ledger, OWNER, sha, origin)
    assert print_claim(SimpleNamespace(ledger=ledger), "A", sha, str(run))
    assert f"claim of {sha}: holds: verified against its run" in capsys.readouterr().out
    _enter(ledger, OWNER, "f" * 64, {**origin, "random_seed": 1})  # another program than the run's pick
    assert not print_claim(SimpleNamespace(ledger=ledger), "A", "f" * 64, str(run))
    assert "FAILS" in capsys.readouterr().out


def test_a_comment_added_to_the_seed_program_makes_no_new_family(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    first = _plan(ledger)
    _enter(ledger, OWNER, "H_first", _origin(first))
    tweaked = _plan(ledger, seed_source=seed_path("v1").read_text() + "\n# a new family?\n")
    assert tweaked["payload"]["seed_sha256"] != first["payload"]["seed_sha256"]
    entry = _enter(ledger, OWNER, "H_second", _origin(tweaked))
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.family_looks == 2 and "same family" in verdict.reason  # its look, entry
    table = leaderboard.test_looks_by_plan(ledger.events())
    assert table[table.random_seed == 0].family.nunique() == 1
