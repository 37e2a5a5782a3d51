"""The third red team against the pre-registration claim (2026-12-05, /tmp/redteam p2-p11): hand-made peeks tagged
with another of the plan's seeds, an entry whose run is another seed's (or entered twice), the plan author's
untagged looks at other programs between plan and entry, a ``# coding:`` line that left a look without digests,
a program nested too deeply to digest (a traceback inside ``Arena.submit``), malformed run folders that made
``verify_claim`` raise, and malformed ledger payloads. A real signed ledger and hand-written run folders."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from test_search_arena_claims import OWNER, _enter, _look, _origin, _plan, _selected_run
from test_search_preregister import _run

from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.code_shape import checked_digests, code_digest, look_digests
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.scoring.plan_looks import looks_table
from cachecraft_lib.arena.submissions.errors import SubmissionError
from cachecraft_lib.search import selection
from cachecraft_lib.search.preregister import _origin_differs, verify_claim
from cachecraft_lib.search.seeds import seed_path
from cachecraft_lib.search.submit import converted_method, run_origin

DEEP = ("def _never(a):\n    return " + "+".join(["a"] * 600) + "\n").encode()  # the folder checks pass it (p6c)


def _sha(code: bytes) -> str:
    return hashlib.sha256(code).hexdigest()


def _setup(tmp_path, seeds=(0,)):
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger, random_seeds=list(seeds))
    run, sha = _selected_run(tmp_path, ledger, plan)
    return ledger, plan, run, sha


def _honest(plan: dict, run, seed: int = 0, **more) -> dict:
    return _origin(plan, seed, run_id=run_origin(run)["run_id"], child_id="c", **selection.selection_digests(run),
                   **more)


# ------------------------------------------------------------------------------------- 1: other seeds' tags
def test_peeks_at_the_pick_tagged_with_the_plans_other_seeds_count(tmp_path):
    ledger, plan, run, sha = _setup(tmp_path, seeds=(0, 1, 2, 3))
    for seed in (1, 2, 3):  # hand-made entries of the exact pick, tagged with the other seeds (p2)
        _enter(ledger, OWNER, sha, {"kind": "search", "plan_hash": plan["payload"]["plan_hash"], "random_seed": seed})
    entry = _enter(ledger, OWNER, sha, _honest(plan, run))
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds and verdict.looks == 4 and "4 test looks at this program" in verdict.reason


def test_another_seeds_entry_of_the_same_run_is_no_exemption(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    _enter(ledger, OWNER, "H_same", _origin(plan, 1, run_id="r"))
    entry = _enter(ledger, OWNER, "H_same", _origin(plan, 0, run_id="r"))  # one run entered as both seeds
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2
    other = Ledger(tmp_path / "other" / "ledger.jsonl")  # another run's entry of the same program is that seed's
    plan = _plan(other)
    _enter(other, OWNER, "H_same", _origin(plan, 1, run_id="r1"))
    entry = _enter(other, OWNER, "H_same", _origin(plan, 0, run_id="r0"))
    assert claim_verdict(other.events(), entry).holds


# ----------------------------------------------------------------------------------- 2: the run's own origin
def test_an_entry_claiming_another_seed_than_its_run_fails_against_the_run(tmp_path):
    ledger, plan, run, sha = _setup(tmp_path, seeds=(0, 1))  # the run's random seed is 0
    entry = _enter(ledger, OWNER, sha, _honest(plan, run, seed=1))
    assert claim_verdict(ledger.events(), entry).holds  # the ledger alone cannot tell
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds and "random_seed 1, its run's is 0" in verdict.reason


def test_an_origin_naming_another_seed_program_than_its_run_differs():
    """Through the ledger a plan's seed program is the run's (check_registration) and the origin's (claim_verdict),
    so this is the comparison alone: the origin against ``run_origin``'s fields."""
    ran = {"run_id": "r", "random_seed": 0, "seed": "v1"}
    assert _origin_differs([], {"seq": 0}, dict(ran), ran) == ""
    assert "seed 'v2', its run's is 'v1'" in _origin_differs([], {"seq": 0}, {**ran, "seed": "v2"}, ran)


def test_a_run_named_by_an_earlier_entry_is_not_verified_again(tmp_path):
    ledger, plan, run, sha = _setup(tmp_path)
    rid = run_origin(run)["run_id"]
    _enter(ledger, "bob", "H_other", {"kind": "search", "run_id": rid})  # not counted as a look of the plan
    entry = _enter(ledger, OWNER, sha, _honest(plan, run))
    assert claim_verdict(ledger.events(), entry).holds
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds and "an earlier entry (seq" in verdict.reason and rid in verdict.reason


# ------------------------------------------------------------------------ 3: looks between plan and entry
def test_the_plan_authors_untagged_looks_after_the_plan_fail_the_claim(tmp_path):
    ledger, plan, run, sha = _setup(tmp_path)
    _look(ledger, OWNER, "H_before_nothing", board="B")  # another board: not the plan's test items
    _look(ledger, "bob", "H_bob")  # another author
    peeks = [_look(ledger, OWNER, f"H_peek{i}")["seq"] for i in range(3)]  # p4 (a): other runs' picks, untagged
    entry = _enter(ledger, OWNER, sha, _honest(plan, run))
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds
    assert f"had 3 other test look(s) on board A, round 1 after the plan and before this entry (seqs {peeks})" \
        in verdict.reason


def test_looks_before_the_plan_and_the_plans_own_seeds_entries_are_no_peeks(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    _look(ledger, OWNER, "H_early")  # before the plan: the plan's round_looks_before_plan says so
    plan = _plan(ledger, random_seeds=[0, 1])
    _enter(ledger, OWNER, "H_1", _origin(plan, 1, run_id="r1"))  # seed 1's entry first
    entry = _enter(ledger, OWNER, "H_0", _origin(plan, 0, run_id="r0"))
    verdict = claim_verdict(ledger.events(), entry)
    assert verdict.holds, verdict.reason


# --------------------------------------------------------------------------------- 4, 5: digests refused
def test_a_coding_line_does_not_hide_a_program_from_its_digests(tmp_path):
    code = seed_path("v1").read_text().encode()
    for cookie in (b"# coding: nonexistent\n", b"# -*- coding: rot13 -*-\n", b"# coding: utf-16\n"):
        found = look_digests(cookie + code)
        assert found["program_ast"] == code_digest(code) and set(found) == {"program_ast", "program_shape"}
    ledger, plan, run, sha = _setup(tmp_path)  # p7b: the peek at the pick with a cookie counts
    pick = converted_method(selection.read_selected(run)[1], "c")
    peek = b"# coding: nonexistent\n" + pick
    _look(ledger, "bob-alt", _sha(peek), **look_digests(peek))
    entry = _enter(ledger, OWNER, sha, _honest(plan, run), **look_digests(pick))
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds and verdict.looks == 2


@pytest.mark.parametrize("code", [DEEP, b"\xff\xfe not utf-8", b"def f(:\n"], ids=["deep", "bytes", "syntax"])
def test_a_program_without_digests_is_refused_not_raised(code):
    assert look_digests(code) != {"program_ast", "program_shape"}  # never raises (p6b: RecursionError)
    with pytest.raises(SubmissionError, match="could not be digested"):
        checked_digests(code)


def test_the_arena_refuses_a_program_nested_too_deeply_to_digest(tmp_path):
    from test_arena_trust import ASSETS, SECRET

    from cachecraft_lib.arena.arena import Arena
    from cachecraft_lib.arena.submissions.folder import load_submission

    folder = tmp_path / "deep"
    shutil.copytree(ASSETS / "good_scores", folder)
    (folder / "metadata.yaml").write_text("name: deep-one\nauthor: mallory\nboards: [A]\n")
    (folder / "method.py").write_bytes((folder / "method.py").read_bytes() + b"\n\n" + DEEP)
    assert load_submission(folder).code.endswith(DEEP)  # the folder checks pass it: the digest refuses it
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    result = arena.submit(folder, "A", SECRET)  # p6c: a RecursionError traceback before
    assert result.rejected and result.kind == "bad_method" and not result.on_test
    assert arena._loaded is None  # refused before any model was loaded


# ------------------------------------------------------------------------------ 6: malformed run folders
@pytest.mark.parametrize("case", ["selected not json", "selected a list", "no child_id", "program missing",
                                  "program not utf-8", "shortlist empty"])
def test_a_malformed_run_folder_is_a_failing_verdict(tmp_path, case):
    ledger, plan, run, sha = _setup(tmp_path)
    entry = _enter(ledger, OWNER, sha, _honest(plan, run))
    folder = run / selection.SELECTED
    if case == "selected not json":
        (folder / "selected.json").write_text("{not json")
    elif case == "selected a list":
        (folder / "selected.json").write_text("[1, 2]")
    elif case == "no child_id":
        info = json.loads((folder / "selected.json").read_text())
        info.pop("child_id")
        (folder / "selected.json").write_text(json.dumps(info))
    elif case == "program missing":
        (folder / "program.py").unlink()
    elif case == "program not utf-8":
        (folder / "program.py").write_bytes(b"\xff\xfe")
    else:
        (folder / "shortlist.csv").write_text("")
    verdict = verify_claim(ledger.events(), entry, run)  # raised before (p10)
    assert not verdict.holds and not verdict.verified and f"against its run {run.name}" in verdict.reason


def test_an_honest_folder_still_verifies(tmp_path):
    ledger, plan, run, sha = _setup(tmp_path)
    entry = _enter(ledger, OWNER, sha, _honest(plan, run))
    verdict = verify_claim(ledger.events(), entry, run)
    assert verdict.verified, verdict.reason
    assert looks_table(ledger.events()).looks.sum() >= 1
    assert _run  # the run folders above are test_search_preregister's


# ------------------------------------------------------------------------- 7: like with like, odd payloads
def test_a_plan_whose_seed_program_is_a_file_path_can_be_claimed(tmp_path):
    seed_file = tmp_path / "myseed.py"
    seed_file.write_text(seed_path("v1").read_text())
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger, random_seeds=[0], seed_program=str(seed_file), seed_source=seed_file.read_text())
    run = _run(tmp_path / "run", seed=str(seed_file))  # run_origin names the seed by its stem (p11)
    origin = {**_origin(plan, 0), **{k: v for k, v in run_origin(run).items() if k in ("seed", "run_id")}}
    assert origin["seed"] == "myseed"
    verdict = claim_verdict(ledger.events(), _enter(ledger, OWNER, "H", origin))
    assert verdict.holds, verdict.reason
    wrong = _enter(ledger, OWNER, "H2", {**_origin(plan, 0), "seed": "otherseed"})
    assert "the plan's seed program is" in claim_verdict(ledger.events(), wrong).reason


def _odd(kw_plan: dict | None = None, **case) -> list[dict]:
    from cachecraft_lib.arena.scoring.ledger_fields import _plan_digest

    body = {"board": "A", "seed_program": "v1", "seed_sha256": "s" * 64, "random_seeds": [0], "round": 1,
            "round_commitment": None, "author": "me", **(kw_plan or {})}
    body["plan_hash"] = _plan_digest(body)
    plan = {"seq": 0, "kind": "plan", "payload": body}
    look = {"seq": 1, "kind": "test_look", "payload": {"board": "A", "round": 1, "author": "me", "program": "h"}}
    entry = {"seq": 2, "kind": "submission", "payload": {"board": "A", "author": "me", "round": 1, "code_sha256": "h",
             "origin": {"registration": "preregistered", "plan_hash": body["plan_hash"], "random_seed": 0,
                        "seed": "v1"}}}
    events = [plan, look, entry]
    for i, changed in case.items():
        events[int(i[1:])] = {**events[int(i[1:])], **changed}
    return events


@pytest.mark.parametrize("events", [
    _odd({"random_seeds": 5}), _odd(e0={"seq": None}), _odd(e2={"seq": "2"}), _odd(e1={"seq": None}),
    [{"seq": 0, "kind": "round", "payload": ["x"]}] + [{**e, "seq": e["seq"] + 1} for e in _odd()]],
    ids=["random_seeds int", "plan seq None", "entry seq str", "look seq None", "round payload list"])
def test_malformed_ledger_payloads_are_skipped_or_fail_never_raise(events):
    verdict = claim_verdict(events, events[-1])  # p8: each raised before
    assert isinstance(verdict.holds, bool)
    assert looks_table(events) is not None
