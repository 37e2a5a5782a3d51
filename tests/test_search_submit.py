"""A search run's best program through the arena (``search.submit``, ``arena submit-search``), smoke profile.

The run folder is written here (the V1 program as the best child of a two-step lineage): the test checks the
written submission passes ``arena check``, that every number its DESCRIPTION claims matches the dev report (the
rule judge's own check), that the ledger's entry records the run's origin, and that the review is recorded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.judges.claims import check_claims
from cachecraft_lib.arena.submissions.folder import load_submission, metadata_origin
from cachecraft_lib.search import submit as search_submit
from cachecraft_lib.search.seeds import seed_path

SECRET = hashlib.sha256(b"cachecraft tests: search submit secret").hexdigest().encode()


def _run_folder(tmp_path: Path) -> Path:
    """A run as `cachecraft evolve` leaves it: run_info, trace (seed -> a -> b), best/ holding child b."""
    run = tmp_path / "run_v1"
    (run / "best").mkdir(parents=True)
    code = seed_path("v1").read_text()
    (run / "initial_program.py").write_text(code)
    (run / "best" / "best_program.py").write_text(code)
    (run / "best" / "best_program_info.json").write_text(json.dumps({"id": "b"}))
    (run / "run_info.txt").write_text("seed=v1\nmutator=offline-mutator (not an LLM) structural\n"
                                      "iterations=7\nrandom_seed=3\n")
    rows = [{"iteration": 1, "parent_id": "seed", "child_id": "a", "child_code": code,
             "child_metrics": {"combined_score": 1.0, "valid": 1.0}, "llm_response": "Proposed change: SINKS = 4\n"},
            {"iteration": 2, "parent_id": "a", "child_id": "b", "child_code": code,
             "child_metrics": {"combined_score": 2.0, "valid": 1.0}, "llm_response": "Proposed change: WINDOW = 16\n"},
            {"iteration": 3, "parent_id": "seed", "child_id": "c", "child_code": code,
             "child_metrics": {"combined_score": 0.5, "valid": 1.0}, "llm_response": "Proposed change: POOL = 0.5\n"}]
    (run / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_origin_and_lineage(tmp_path):
    run = _run_folder(tmp_path)
    origin = search_submit.run_origin(run)
    assert origin["seed"] == "v1" and origin["iterations"] == 7 and origin["random_seed"] == 3
    assert origin["run_id"].startswith("run_v1-") and origin["mutator"].endswith("structural")
    assert search_submit.edit_lineage(run) == ["SINKS = 4", "WINDOW = 16"]  # c is not on the best's lineage


def test_origin_read_leniently(tmp_path):
    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump({"name": "x", "author": "y", "boards": ["A"], "origin": {
        "kind": "search", "run_id": "r", "iterations": "many", "seed": "v1", "evil": "x" * 10}}))
    assert metadata_origin(tmp_path) == {"kind": "search", "run_id": "r", "seed": "v1"}
    (tmp_path / "metadata.yaml").write_text("name: x\nauthor: y\nboards: [A]\n")
    assert metadata_origin(tmp_path) is None


@pytest.mark.slow
def test_submit_search_end_to_end(tmp_path):
    from cachecraft_lib.arena.scoring.leaderboard import test_looks_by_plan
    from cachecraft_lib.search.preregister import PREREGISTERED, Registration

    arena = Arena("smoke", tmp_path / "arena")
    run = _run_folder(tmp_path)
    registration = Registration(PREREGISTERED, {"payload": {"plan_hash": "ab" * 32}})  # a plan's event, as read
    prepared = search_submit.prepare(run, tmp_path / "sub", "A", arena, registration=registration)
    sub = load_submission(prepared.folder)  # passes `arena check`
    assert sub.name == "search-v1-3" and sub.boards == ("A",)
    text = (prepared.folder / "DESCRIPTION.md").read_text()
    claims = check_claims(text, prepared.dev)
    assert len(claims) >= 4 and all(c.matched for c in claims)  # overall, accuracy, memory, gain: as measured
    assert "1. SINKS = 4" in text and "2. WINDOW = 16" in text and prepared.closest["name"] in text
    search_submit.submit(prepared, "A", arena, SECRET)
    entry = prepared.entry
    assert not entry.get("rejected"), entry
    events = arena.ledger.events()
    recorded = [e["payload"] for e in events if e["kind"] == "submission"]
    assert recorded[-1]["origin"] == prepared.origin and recorded[-1]["origin"]["iterations"] == 7
    look = [e["payload"] for e in events if e["kind"] == "test_look"][-1]  # the entry's look names its plan and run
    assert (look["name"], look["plan"], look["random_seed"]) == (sub.name, "ab" * 8, 3)
    assert look["run_id"] == prepared.origin["run_id"]
    by_plan = test_looks_by_plan(events).set_index("plan")
    assert by_plan.loc["ab" * 8, "looks"] == 1 and by_plan.loc["ab" * 8, "names"] == sub.name
    reviews = [e["payload"] for e in events if e["kind"] == "review"]
    assert reviews and reviews[-1]["name"] == sub.name
    assert "FABRICATED_EVIDENCE" not in prepared.review.flags and prepared.review.soundness == 3


def _ranked_run(tmp_path: Path) -> Path:
    """A run whose children carry distinct programs: b is the recorded best, d repeats a's code."""
    run = _run_folder(tmp_path)
    code = seed_path("v1").read_text()
    rows = [{"iteration": i, "parent_id": "seed", "child_id": cid, "child_code": code + f"# {tag}\n",
             "child_metrics": {"combined_score": fit, "valid": float(valid)}, "llm_response": f"Proposed change: {cid}\n"}
            for i, (cid, tag, fit, valid) in enumerate([("a", "a", 1.0, True), ("b", "b", 2.0, True),
                                                        ("c", "c", 0.5, True), ("d", "a", 1.5, True),
                                                        ("e", "e", 9.0, False)], 1)]
    (run / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_top_children_best_first_distinct_valid(tmp_path):
    run = _ranked_run(tmp_path)
    top = search_submit.top_children(run, 3)
    assert [c for c, _ in top] == ["b", "d", "c"]  # d has a's code at a higher fitness; e is invalid
    assert len({code for _, code in top}) == 3 and top[0][1].endswith("# b\n")
    assert [c for c, _ in search_submit.top_children(run, 1)] == ["b"]
    assert search_submit.edit_lineage(run, "c") == ["c"]


def test_the_rate_limit_caps_how_many_of_the_top_are_submitted(tmp_path, capsys):
    from cachecraft_lib.arena.scoring.ledger import RATE_LIMIT, Ledger
    from cachecraft_lib.cli.arena_submit_search import _picks

    ledger = Ledger(tmp_path / "ledger.jsonl")
    for i in range(RATE_LIMIT - 2):
        ledger.append("submission", {"name": f"x{i}", "author": "cachecraft-search"})
    ledger.append("submission", {"name": "y", "author": "someone else"})
    assert ledger.quota("cachecraft-search") == 2 and ledger.quota("Someone  Else") == RATE_LIMIT - 1
    run = _ranked_run(tmp_path)
    picks = _picks(SimpleNamespace(top=3, dev_only=False), SimpleNamespace(ledger=ledger), "cachecraft-search", run)
    assert [c for c, _ in picks] == ["b", "d"] and "c left out" in capsys.readouterr().out
    assert len(_picks(SimpleNamespace(top=3, dev_only=True), SimpleNamespace(ledger=ledger),
                      "cachecraft-search", run)) == 3  # dev-only submits nothing: no limit


def test_the_selection_half_choice_is_what_is_submitted(tmp_path):
    from cachecraft_lib.cli.arena_submit_search import _picks
    from cachecraft_lib.search import selection

    run = _ranked_run(tmp_path)
    args = SimpleNamespace(top=1, dev_only=False)
    assert _picks(args, None, "cachecraft-search", run) == [None]  # no choice recorded: best/best_program.py
    table = pd.DataFrame({"child_id": ["c"], "search_fitness": [0.5], "selection_fitness": [0.7], "chosen": [True]})
    selection.write_selected(run, selection.Selected("c", "code of c\n", 0.7, table))
    assert _picks(args, None, "cachecraft-search", run) == [("c", "code of c\n")]


@pytest.mark.slow
def test_a_top_child_is_prepared_with_its_own_lineage_and_origin(tmp_path):
    arena = Arena("smoke", tmp_path / "arena")
    run = _ranked_run(tmp_path)
    child = search_submit.top_children(run, 3)[2]
    prepared = search_submit.prepare(run, tmp_path / "sub" / "c", "A", arena, name="search-v1-3-3", child=child,
                                     rank=3)
    assert load_submission(prepared.folder).name == "search-v1-3-3"
    assert prepared.origin["child_id"] == "c" and prepared.origin["rank"] == 3
    assert metadata_origin(prepared.folder)["child_id"] == "c"
    assert "1. c" in (prepared.folder / "DESCRIPTION.md").read_text()
