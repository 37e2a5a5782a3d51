"""Pre-registration (search.preregister) and the submission's choice on dev items alone (search.selection,
search.seed_pool), without a model: a real signed ledger, hand-written run folders, fake fitness objects."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search import preregister, selection
from cachecraft_lib.search.seed_pool import pool_seeds
from cachecraft_lib.search.seeds import seed_path


def _plan(**kw) -> preregister.Plan:
    args = dict(board="A", profile="smoke", seed_program="v1", seed_source=seed_path("v1").read_text(),
                generations=1, population=2, random_seeds=[0, 1], structural=True, split_seed=selection.SPLIT_SEED,
                top_k=2, rule=selection.rule_text(), events=[])
    return preregister.make_plan(**{**args, **kw})


def _run(folder: Path, random_seed: int = 0, started: datetime | None = None, unstarted: bool = False,
         **info) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    code = seed_path("v1").read_text()
    fields = {"board": "A", "seed": "v1", "mutator": "offline-mutator (not an LLM) structural", "generations": 1,
              "population": 2, "random_seed": random_seed,
              "started": None if unstarted else (started or datetime.now(UTC)).isoformat(), **info}
    (folder / "run_info.txt").write_text("".join(f"{k}={v}\n" for k, v in fields.items() if v is not None))
    (folder / "initial_program.py").write_text(code)
    rows = [{"iteration": i, "parent_id": "seed", "child_id": c, "child_code": code + f"# {c}\n",
             "child_metrics": {"combined_score": f, "valid": 1.0}, "llm_response": f"Proposed change: {c}\n"}
            for i, (c, f) in enumerate([("a", 0.9), ("b", 0.5), ("c", 0.7)], 1)]
    (folder / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _registered(tmp_path: Path, **plan) -> tuple[Ledger, dict]:
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    return ledger, preregister.record_plan(ledger, _plan(**plan))


def test_a_run_recorded_before_it_started_is_accepted(tmp_path):
    ledger, event = _registered(tmp_path)
    run = _run(tmp_path / "run")
    preregister.write_plan_ref(run, event)
    reg = preregister.check_registration(ledger.events(), run, "run-x")
    assert reg.label == preregister.PREREGISTERED and reg.plan_event["hash"] == event["hash"]
    assert event["kind"] == "plan" and event["payload"]["random_seeds"] == [0, 1]
    assert event["payload"]["plan_hash"] == preregister.plan_hash(event["payload"])


@pytest.mark.parametrize("case", ["no plan file", "plan after start", "other seed", "other sizes", "not in ledger",
                                  "entry before plan", "no start", "no structural operators", "no mutator",
                                  "plan after the round's commitment"])
def test_a_run_without_a_plan_recorded_before_it_started_is_refused(tmp_path, case):
    if case == "plan after the round's commitment":  # the plan says the secret did not exist yet; the ledger disagrees
        ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
        ledger.append("round", {"round": 1, "profile": "smoke", "commitment": "abc"})
        event = preregister.record_plan(ledger, _plan())
    else:
        ledger, event = _registered(tmp_path)
    started = datetime.fromisoformat(event["time"]) - timedelta(seconds=1) if case == "plan after start" else None
    mutator = {"no structural operators": {"mutator": "offline-mutator (not an LLM)"},
               "no mutator": {"mutator": ""}}.get(case, {})
    run = _run(tmp_path / "run", random_seed=7 if case == "other seed" else 0, started=started,
               **({"generations": 3} if case == "other sizes" else {}), **mutator,
               unstarted=case == "no start")
    if case != "no plan file":
        preregister.write_plan_ref(run, event)
    events = ledger.events()
    if case == "not in ledger":
        events = Ledger(tmp_path / "other" / "ledger.jsonl").events()
    if case == "entry before plan":
        events = [{"seq": 0, "kind": "submission", "payload": {"origin": {"run_id": "run-x"}}},
                  {**event, "seq": 1}]
    with pytest.raises(preregister.NotPreregistered):
        preregister.check_registration(events, run, "run-x")
    reg = preregister.check_registration(events, run, "run-x", exploratory=True)
    assert reg.label == preregister.EXPLORATORY and reg.plan_event is None and reg.reason


def test_an_altered_plan_is_refused(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan()
    event = ledger.append("plan", {**plan.payload(), "plan_hash": plan.digest(), "random_seeds": [0, 1, 2]})
    run = _run(tmp_path / "run", random_seed=2)
    preregister.write_plan_ref(run, event)
    with pytest.raises(preregister.NotPreregistered, match="does not match its plan hash"):
        preregister.check_registration(ledger.events(), run)


def test_the_plan_names_the_round_commitment_when_the_round_exists():
    events = [{"kind": "round", "payload": {"round": 1, "commitment": "abc", "salt": "s"}}]
    assert _plan(events=events).round_commitment == "abc"
    assert _plan(events=events, round_=2).round_commitment is None  # its secret is drawn after the plan
    with pytest.raises(ValueError, match="distinct"):
        _plan(random_seeds=[1, 1])


def test_submit_search_refuses_before_reading_any_secret(tmp_path, monkeypatch, capsys):
    from cachecraft_lib.arena.boards import splits
    from cachecraft_lib.cli.arena_submit_search import _cmd_submit_search

    def secret_read(*_a, **_k):
        raise AssertionError("the secret was read for a run that must be refused")

    monkeypatch.setattr(splits, "load_secret", secret_read)
    run = _run(tmp_path / "run")  # no plan.json
    args = SimpleNamespace(profile="smoke", root=str(tmp_path / "arena"), board="A", run=[str(run)],
                           exploratory=False, dev_only=False, top=1)
    assert _cmd_submit_search(args) == 2
    assert "refused run" in capsys.readouterr().err


def _items(tasks: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame([{"context_id": f"1024/{t}/{i}", "task": t, "item": f"1024/{t}/{i}/{q}"}
                         for t, n in tasks.items() for i in range(n) for q in range(2)])


def test_the_dev_halves_are_disjoint_cover_every_task_and_follow_the_public_seed():
    items = _items({"qa_1": 5, "niah_single_1": 4, "vt": 2})
    halves = selection.split_dev(items)
    assert not set(halves.search) & set(halves.selection)
    assert set(halves.search) | set(halves.selection) == set(items.context_id)
    for t in ("qa_1", "niah_single_1", "vt"):
        assert any(t in c for c in halves.search) and any(t in c for c in halves.selection)
    assert (len(halves.search), len(halves.selection)) == (6, 5)
    assert selection.split_dev(items.sample(frac=1, random_state=3)) == halves  # the order of rows does not matter
    assert selection.split_dev(items, seed=1).search != halves.search
    with pytest.raises(ValueError, match="two are needed"):
        selection.split_dev(_items({"qa_1": 1}))


class _Fitness:
    """Selection-half scores by program text: ``evaluate`` returns results whose ``fitness`` is looked up."""

    def __init__(self, scores: dict[str, float]):
        self.scores, self.seen = scores, []

    def evaluate(self, sources):
        self.seen += sources
        return [SimpleNamespace(fitness=self.scores[s.rsplit("# ", 1)[1].strip()], report=None) for s in sources]


def test_the_best_on_the_search_half_and_worst_on_the_selection_half_is_not_chosen(tmp_path):
    run = _run(tmp_path / "run")  # search-half fitness: a 0.9 (best), c 0.7, b 0.5
    fit = _Fitness({"a": 0.1, "b": 0.6, "c": 0.8})  # on the selection half: a is the worst
    chosen = selection.select(run, fit, top_k=3)
    assert chosen.child_id == "c" and chosen.estimate == 0.8 and len(fit.seen) == 3
    assert (run / "selected" / "program.py").read_text().endswith("# c\n")
    assert selection.read_selected(run)[0] == "c"
    table = pd.read_csv(run / "selected" / "shortlist.csv")
    assert table.set_index("child_id").loc["a", "search_fitness"] == 0.9 and table.chosen.sum() == 1
    assert selection.select(run, _Fitness({"a": 0.1, "b": 0.6, "c": 0.8}), top_k=2).child_id == "c"  # top 2: a, c


def test_the_rule_reads_only_the_selection_half():
    code = {c: seed_path("v1").read_text() + f"# {c}\n" for c in "abc"}
    picks = [(c, code[c]) for c in "abc"]
    scores = {"a": 0.2, "b": 0.9, "c": 0.5}
    assert selection.choose(picks, scores) == "b"
    for order in (picks[::-1], [picks[1], picks[2], picks[0]]):  # the search's order changes nothing
        assert selection.choose(order, scores) == "b"
    tie = {"a": 0.5, "b": 0.5, "c": 0.5}
    assert len({selection.choose(o, tie) for o in (picks, picks[::-1])}) == 1  # ties by digest, not by order
    with pytest.raises(ValueError, match="no candidate"):
        selection.choose(picks, {"a": None, "b": None, "c": None})


def test_the_pooled_gain_is_the_mean_over_seeds_and_counts_the_seeds_that_beat_the_reference():
    rng = np.random.default_rng(0)
    units = pd.DataFrame({"context_id": [f"c{i}" for i in range(60)], "task": ["t1", "t2", "t3"] * 20})
    ref = units.assign(overall=rng.uniform(0.3, 0.7, 60))
    gains = {0: 0.10, 1: 0.0, 2: -0.04}
    seeds = {s: units.assign(overall=ref.overall + g + rng.normal(0, 0.01, 60)) for s, g in gains.items()}
    pool = pool_seeds(seeds, {s: f"search-{s}" for s in seeds}, ref, "frc", threshold=0.005)
    assert list(pool.per_seed.beats) == [True, False, False] and pool.beats == 1
    assert pool.pooled_gain == pytest.approx(pool.per_seed.gain.mean(), abs=1e-12)
    assert pool.pooled_lo < pool.pooled_gain < pool.pooled_hi
    assert "1 of 3 seeds beat frc" in pool.summary()
    with pytest.raises(ValueError, match="same units"):
        pool_seeds({0: seeds[0].iloc[:30]}, {0: "x"}, ref, "frc", 0.005)


def test_seed_program_is_the_option_and_seed_an_alias_that_warns(capsys):
    from cachecraft_lib.cli import build_parser
    from cachecraft_lib.cli.arena_search import _seed_program

    new = build_parser().parse_args(["arena", "search", "--board", "A", "--seed-program", "v5"])
    assert _seed_program(new) == "v5"
    old = build_parser().parse_args(["arena", "search", "--board", "A", "--seed", "v5"])
    with pytest.warns(FutureWarning, match="--seed-program"):
        assert _seed_program(old) == "v5"
    assert "deprecated" in capsys.readouterr().err


def test_a_claim_to_be_preregistered_is_checked_against_the_ledger(tmp_path):
    ledger, plan = _registered(tmp_path)
    prefix = plan["payload"]["plan_hash"][:16]

    def entry(**origin):
        author = origin.pop("author", "cachecraft-search")  # the plan's author (make_plan's default)
        return ledger.append("submission", {"board": "A", "name": "x", "author": author, "round": 1, "origin": {
            "kind": "search", "seed": "v1", "random_seed": 1, "registration": "preregistered", "plan": prefix,
            **origin}})

    honest, other_seed, spoofed = entry(), entry(random_seed=9), entry(plan="0" * 16)
    someone_else = entry(author="mallory")  # a public plan copied into another author's metadata.yaml
    events = ledger.events()
    assert preregister.claim_holds(events, honest)
    assert not preregister.claim_holds(events, other_seed) and not preregister.claim_holds(events, spoofed)
    assert "recorded by 'cachecraft-search'" in preregister.claim_verdict(events, someone_else).reason
    assert not preregister.claim_holds(events, {**honest, "seq": 0})  # a plan recorded after the entry counts not


def test_a_claim_fails_for_a_second_entry_of_one_plan_and_seed_and_for_a_plan_that_misstates_its_round(tmp_path):
    ledger, plan = _registered(tmp_path)
    prefix = plan["payload"]["plan_hash"][:16]
    origin = {"kind": "search", "seed": "v1", "random_seed": 1, "registration": "preregistered", "plan": prefix}
    first = ledger.append("submission", {"board": "A", "name": "x", "author": "cachecraft-search", "origin": origin})
    second = ledger.append("submission", {"board": "A", "name": "x2", "author": "Cachecraft-Search", "origin": origin})
    events = ledger.events()
    assert preregister.claim_holds(events, first) and not preregister.claim_holds(events, second)

    late = Ledger(tmp_path / "late" / "ledger.jsonl")
    late.append("round", {"round": 1, "profile": "smoke", "commitment": "abc"})
    honest = preregister.record_plan(late, _plan(events=late.events()))  # names the commitment it was made under
    misstated = preregister.record_plan(late, _plan(events=[], notes="says no round yet"))
    for plan_event, holds in ((honest, True), (misstated, False)):
        entry = late.append("submission", {"board": "A", "name": "z", "author": "cachecraft-search", "origin": {
            **origin, "plan": plan_event["payload"]["plan_hash"][:16]}})
        assert preregister.claim_holds(late.events(), entry) is holds


def test_a_ledger_event_cannot_be_backdated(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    last = ledger.append("plan", {"board": "A"})
    with pytest.raises(ValueError, match="time order"):
        ledger.append("plan", {"board": "A"}, now=datetime.fromisoformat(last["time"]) - timedelta(hours=3))
    assert len(ledger.events()) == 1


@pytest.mark.parametrize("edit", ["none", "another child", "another program", "no selection", "--top 2"])
def test_a_preregistered_run_submits_only_the_program_its_rule_chose(tmp_path, edit, capsys):
    from argparse import Namespace

    from cachecraft_lib.cli.arena_submit_search import _registration

    ledger, event = _registered(tmp_path, top_k=3)
    run = _run(tmp_path / "run")
    preregister.write_plan_ref(run, event)
    selection.select(run, _Fitness({"a": 0.1, "b": 0.6, "c": 0.8}), top_k=3)  # the rule picks c
    chosen = run / selection.SELECTED
    if edit == "another child":  # the search half's best, written in by hand
        (chosen / "selected.json").write_text(json.dumps({"child_id": "a", "selection_fitness": 0.8}))
        (chosen / "program.py").write_text(seed_path("v1").read_text() + "# a\n")
    if edit == "another program":
        (chosen / "program.py").write_text(seed_path("v1").read_text() + "# edited\n")
    if edit == "no selection":
        (chosen / "selected.json").unlink()
    args = Namespace(exploratory=False, dev_only=False, top=2 if edit == "--top 2" else 1)
    reg = _registration(args, ledger.events(), str(run))
    assert (reg is not None) is (edit == "none"), capsys.readouterr().err
    if edit != "none":
        assert "refused" in capsys.readouterr().err
