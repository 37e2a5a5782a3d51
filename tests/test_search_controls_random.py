"""The random-search control (search.random_control): the search's program space sampled without selection, at
the search's budget, written as a run the same selection rule reads. A stand-in fitness (no model) scores each
program by its digest, so the tests say what the control does with scores, not what a model makes of them."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from cachecraft_lib.search import random_control, selection
from cachecraft_lib.search.candidate_result import CandidateResult, candidate_name
from cachecraft_lib.search.operators import is_structured
from cachecraft_lib.search.run_picks import top_children
from cachecraft_lib.search.runlog import load_run
from cachecraft_lib.search.seeds import seed_path


class _Fitness:
    """Scores a program by a salted digest of its code (any salt gives another ranking); counts what it scored."""

    def __init__(self, salt: str = "") -> None:
        self.salt, self.scored = salt, []
        self.items = pd.DataFrame({"context_id": ["4096/x/0", "4096/y/0"], "task": ["x", "y"]})
        self.gate = 0.0

    def score(self, code: str) -> float:
        return int(hashlib.sha256((self.salt + code).encode()).hexdigest()[:8], 16) / 16**8

    def evaluate(self, sources: list[str]) -> list[CandidateResult]:
        self.scored += sources
        return [CandidateResult(candidate_name(s), True, 2, 0.0, gate_score=self.score(s), fitness=self.score(s))
                for s in sources]


SEED = seed_path("v1").read_text()


def _control(tmp_path, fitness, budget=12, random_seed=3, max_edits=4, name="control"):
    return random_control.random_search("A", "v1", budget, tmp_path / name, "smoke", random_seed, fitness=fitness,
                                        max_edits=max_edits, batch=5)


def test_the_samples_are_the_searchs_edits_of_the_seed_and_repeat_for_a_seed():
    first = list(random_control.sample_programs(SEED, 20, random_seed=7, max_edits=3))
    again = list(random_control.sample_programs(SEED, 20, random_seed=7, max_edits=3))
    other = list(random_control.sample_programs(SEED, 20, random_seed=8, max_edits=3))
    assert [s.code for s in first] == [s.code for s in again] != [s.code for s in other]
    assert len(first) == 20 and all(1 <= len(s.changes) <= 3 for s in first)
    assert len({len(s.changes) for s in first}) > 1  # the depth varies, up to max_edits
    assert any(is_structured(s.code) for s in first)  # the structural operators are in the space
    assert all(s.code != SEED for s in first if not any(c.startswith("(no edit") for c in s.changes))


def test_the_control_spends_the_budget_without_selection(tmp_path):
    """The programs scored do not depend on any score (two fitnesses ranking differently see the same programs),
    every parent is the seed, and the count is the budget (plus the seed's own evaluation)."""
    a, b = _Fitness("a"), _Fitness("b")
    run_a, run_b = _control(tmp_path, a, name="a"), _control(tmp_path, b, name="b")
    trace_a, trace_b = load_run(run_a).trace, load_run(run_b).trace
    assert len(trace_a) == 12 == random_control.search_budget(run_a)
    assert list(trace_a.code) == list(trace_b.code) and a.scored[1:] and sorted(a.scored) == sorted(b.scored)
    assert len(a.scored) == 1 + len(set(trace_a.code))  # the seed once, then each distinct program once
    assert set(trace_a.parent_id) == {candidate_name(SEED)}
    info = load_run(run_a).info
    assert info["control"] == random_control.CONTROL_TAG and info["iterations"] == "12"
    best = json.loads((run_a / "best" / "best_program_info.json").read_text())
    assert best["fitness"] == pytest.approx(max(a.score(c) for c in [SEED, *trace_a.code]))
    passes = pd.read_csv(run_a / "generations.csv")
    assert list(passes.evaluations) == [0, 5, 10, 12] and passes.best.is_monotonic_increasing


def test_the_same_selection_rule_reads_the_controls_run(tmp_path):
    fitness = _Fitness("a")
    run = _control(tmp_path, fitness)
    picks = top_children(run, 3)
    by_score = sorted(load_run(run).trace.itertuples(), key=lambda r: (-r.fitness, r.iteration))
    assert [c for c, _ in picks][0] == by_score[0].child_id  # the top K by search-half fitness
    chooser = _Fitness("selection half")
    chosen = selection.select(run, chooser, top_k=3)
    assert chosen.child_id == selection.choose(picks, {c: chooser.score(code) for c, code in picks})
    assert selection.selection_broken(run, 3) == ""


def test_a_budget_below_one_is_refused():
    with pytest.raises(ValueError, match="budget"):
        list(random_control.sample_programs(SEED, 0, 0))


def _plan_payload(**kw):
    from cachecraft_lib.search import preregister

    plan = preregister.make_plan("A", "smoke", "v1", SEED, 1, 2, [0, 1, 2], True, selection.SPLIT_SEED, 2,
                                 selection.rule_text(), [], **kw)
    return plan.payload()


def test_a_dropped_control_or_comparator_is_named():
    from cachecraft_lib.search.seed_pool import missing_from_plan

    plan = _plan_payload()
    full = {"frc", "snapkv", "seed-v1", *(f"search-v1-{s}" for s in range(3)), *(f"random-v1-{s}" for s in range(3))}
    assert missing_from_plan(plan, full, "snapkv") == []
    assert missing_from_plan(plan, full - {"random-v1-1"}, "snapkv") == ["random-v1-1"]  # one seed's control dropped
    assert missing_from_plan(plan, full - {"seed-v1"}, "snapkv") == ["seed-v1"]
    assert missing_from_plan(plan, full - {"snapkv"}, "snapkv") == ["snapkv"]  # the selection half's best baseline
    assert missing_from_plan(plan, full - {"search-v1-2"}, "snapkv") == ["search-v1-2"]
    assert missing_from_plan({**plan, "comparators": []}, full, "snapkv") == ["the plan names no comparator"]


def test_the_budget_is_the_searchs_full_evaluations(tmp_path):
    """A search that culls children early (successive halving) spent fewer full evaluations than it proposed
    children: the control gets the evaluations (generations.csv), else one per child of the trace."""
    run = _control(tmp_path, _Fitness("a"), budget=7)
    assert random_control.search_budget(run) == 7  # the control's own run: its evaluations column
    pd.DataFrame({"generation": [0, 1, 2], "evaluations": [1.0, 3.5, 7.25], "best": [0.1, 0.2, 0.3]}).to_csv(
        run / "generations.csv", index=False)
    assert random_control.search_budget(run) == 6  # 6.25 children's evaluations, to the nearest program
    (run / "generations.csv").unlink()
    assert random_control.search_budget(run) == 7  # no evaluations column: one per child


class _ThreadsSeen(_Fitness):
    """Records torch's thread count at each evaluation."""

    def evaluate(self, sources: list[str]) -> list[CandidateResult]:
        import torch

        self.threads = [*getattr(self, "threads", []), torch.get_num_threads()]
        return super().evaluate(sources)


def test_the_control_and_the_selection_score_on_the_searchs_threads(tmp_path):
    """Random search and the selection half score as the search screens (``halving.THREADS``): on two shared cores
    torch's default two threads spin-wait (a 48-row decode: 29.4 CPU s against 1.5 on one thread, same answers),
    which made the controls cost ten times the search they control. Torch's setting is restored afterwards."""
    import torch

    from cachecraft_lib.search.halving import THREADS, torch_threads

    with torch_threads(2):
        control, chooser = _ThreadsSeen("a"), _ThreadsSeen("selection half")
        run = _control(tmp_path, control)
        selection.select(run, chooser, top_k=3)
        assert torch.get_num_threads() == 2
    assert set(control.threads) == {THREADS} and set(chooser.threads) == {THREADS}
