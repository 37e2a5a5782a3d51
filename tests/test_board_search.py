"""The board search (search.board_search) on smoke board A: deterministic for a seed, and the search process
never holds a secret: the dev-only guard (search.dev_only) is in place before the first item is loaded, on
every entry point (the CLI, one run, several seeds)."""

from __future__ import annotations

import json
import os
import secrets

import pandas as pd
import pytest

from cachecraft_lib.arena import arena as arena_module
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search import dev_only, selection
from cachecraft_lib.search.board_search import board_search
from cachecraft_lib.search.board_seeds import board_searches
from cachecraft_lib.search.runlog import children_evaluations, load_run
from cachecraft_lib.search.seeds import seed_path

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


@pytest.fixture(scope="module")
def fitness(tmp_path_factory):
    with dev_only.dev_only():
        return dev_only.dev_fitness("A", "smoke", root=tmp_path_factory.mktemp("arena"), seed_program=seed_path("v1"))


class FirstLoad(Exception):
    """Raised by the spy at the load it stops at: what the guard looked like up to then is all the test needs."""


# Item loads to let through before stopping: the CLI first loads the public dev items to split them into the
# search and selection halves (the plan records the search half), then records the plan, then builds the fitness.
LOADS_BEFORE_FITNESS = {"cli": 2, "one run": 1, "several seeds": 1}


@pytest.fixture
def item_loads(monkeypatch, tmp_path):
    """At each item load: is the guard active, are the secret's variables gone, is the secret unreachable, how
    many plans are in the ledger? (The spy replaces the items' generator under ``Arena.items`` and raises
    ``FirstLoad`` at load number ``stop_at[0]``.)"""
    seen: list[dict] = []
    stop_at = [1]

    def spy(board, split, *args, **kwargs):
        state = dict(active=dev_only.active(), env=[v for v in dev_only.SECRET_VARS if v in os.environ],
                     split=split, plans=len(Ledger(tmp_path / "arena" / "ledger.jsonl").events()))
        try:
            splits.load_secret()
            state["secret"] = "read"
        except dev_only.SecretUnreachable:
            state["secret"] = "unreachable"
        seen.append(state)
        if len(seen) >= stop_at[0]:
            raise FirstLoad
        return real(board, split, *args, **kwargs)

    real = arena_module.board_items
    monkeypatch.setattr(arena_module, "board_items", spy)
    monkeypatch.setenv(splits.SECRET_ENV, secrets.token_hex(32))  # the organiser's secret in the environment
    yield seen, stop_at
    for guard in list(dev_only._active):  # the CLI leaves its guard in place for the process: end it here
        dev_only.uninstall(guard)
    assert not dev_only.active() and splits.SECRET_ENV in os.environ  # put back as it was


def _cli(tmp_path):
    from cachecraft_lib.cli import build_parser
    from cachecraft_lib.cli.arena_search import _cmd_search

    return _cmd_search(build_parser().parse_args([
        "arena", "search", "--board", "A", "--profile", "smoke", "--root", str(tmp_path / "arena"),
        "--seed-program", "v1", "--iterations", "2", "--population", "2", "--random-seed", "0", "--preregister",
        "--top", "2", "--out", str(tmp_path / "run")]))


ENTRY_POINTS = {
    "cli": _cli,
    "one run": lambda tmp: board_search("A", "v1", 1, 2, tmp / "run", "smoke", progress=False),
    "several seeds": lambda tmp: board_searches("A", "v1", [0, 1], 1, 2, tmp / "runs", "smoke",
                                                root=tmp / "arena", progress=False),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_the_guard_is_in_place_before_the_first_item_is_loaded(item_loads, tmp_path, entry):
    seen, stop_at = item_loads
    stop_at[0] = LOADS_BEFORE_FITNESS[entry]
    with pytest.raises(FirstLoad):
        ENTRY_POINTS[entry](tmp_path)
    assert len(seen) == stop_at[0]
    for state in seen:  # from the first load on, whatever is loaded
        assert {k: state[k] for k in ("active", "env", "split", "secret")} == {
            "active": True, "env": [], "split": "dev", "secret": "unreachable"}
    # the CLI's plan is in the ledger after the dev split (which it records) and before the fitness is built
    assert [s["plans"] for s in seen] == ([0, 1] if entry == "cli" else [0])


def test_the_guard_refuses_the_test_split_and_puts_everything_back(monkeypatch, tmp_path):
    monkeypatch.setenv(splits.SECRET_FILE_ENV, "/somewhere/secret")
    original = splits.load_secret
    arena = arena_module.Arena("smoke", tmp_path)
    with dev_only.dev_only():
        assert splits.SECRET_FILE_ENV not in os.environ
        with pytest.raises(dev_only.SecretUnreachable):
            arena.items(arena.board("A"), "test", secrets.token_bytes(32))  # even with a secret in hand
        with pytest.raises(dev_only.SecretUnreachable):
            splits.load_secret()
    assert splits.load_secret is original and os.environ[splits.SECRET_FILE_ENV] == "/somewhere/secret"
    with pytest.raises(dev_only.SecretUnreachable, match="install the dev-only guard"):
        dev_only.dev_fitness("A", "smoke")  # refused outside the guard, before anything is loaded


def test_deterministic(fitness, tmp_path):
    """The earlier engine (generational), kept as the benchmark's baseline: the same trace for a seed."""
    runs = [board_search("A", "v1", 2, 3, tmp_path / f"run{i}", "smoke", random_seed=5, fitness=fitness,
                         progress=False, engine="generational") for i in (0, 1)]
    traces = [(r / "evolution_trace.jsonl").read_text() for r in runs]
    assert traces[0] == traces[1] and len(traces[0].splitlines()) == 6
    assert (runs[0] / "best" / "best_program.py").read_text() == (runs[1] / "best" / "best_program.py").read_text()
    other = board_search("A", "v1", 1, 3, tmp_path / "other", "smoke", random_seed=6, fitness=fitness, progress=False,
                         engine="generational")
    assert (other / "evolution_trace.jsonl").read_text() != "\n".join(traces[0].splitlines()[:3]) + "\n"
    run = load_run(runs[0])
    assert run.trace.child_id.is_unique and set(run.trace.generation) == {1, 2}
    gens = pd.read_csv(runs[0] / "generations.csv")
    assert list(gens.generation) == [0, 1, 2] and gens.best.is_monotonic_increasing
    assert gens.evaluations.is_monotonic_increasing and gens.evaluations.iloc[-1] <= 7  # seed + 6 children at most
    best = json.loads((runs[0] / "best" / "best_program_info.json").read_text())
    assert best["fitness"] == pytest.approx(gens.best.iloc[-1])
    changes = [json.loads(line)["llm_response"] for line in traces[0].splitlines()]
    assert all(c.startswith("Proposed change: ") for c in changes)


def test_the_default_engine_is_deterministic_and_spends_its_budget(fitness, tmp_path):
    """The halving engine (the default): the same run folder for a seed, another for another seed; it stops after
    the generation that reaches its budget of evaluations, and its best is a fully scored child."""
    runs = [board_search("A", "v1", out_dir=tmp_path / f"run{i}", profile="smoke", random_seed=5, fitness=fitness,
                         progress=False, iterations=5, population=6) for i in (0, 1)]
    files = ("evolution_trace.jsonl", "generations.csv", "best/best_program.py", "run_info.txt")
    assert all((runs[0] / f).read_text() == (runs[1] / f).read_text() for f in files)
    other = board_search("A", "v1", out_dir=tmp_path / "other", profile="smoke", random_seed=6, fitness=fitness,
                         progress=False, iterations=5, population=6)
    assert (other / "evolution_trace.jsonl").read_text() != (runs[0] / "evolution_trace.jsonl").read_text()
    gens = pd.read_csv(runs[0] / "generations.csv")
    assert gens.evaluations.iloc[-2] < 5 <= gens.evaluations.iloc[-1] and gens.best.is_monotonic_increasing
    assert "engine=halving" in (runs[0] / "run_info.txt").read_text()
    trace = [json.loads(line) for line in (runs[0] / "evolution_trace.jsonl").read_text().splitlines()]
    spent = 1 + sum(t["child_metrics"]["cost"] for t in trace)  # the seed's full evaluation, then every child's share
    assert spent == pytest.approx(gens.evaluations.iloc[-1])
    assert children_evaluations(runs[0]) == pytest.approx(spent - 1)  # a control's budget at the search's
    best = json.loads((runs[0] / "best" / "best_program_info.json").read_text())
    scored = {t["child_id"]: t["child_metrics"]["combined_score"] for t in trace}
    assert best["fitness"] == pytest.approx(max([gens.best.iloc[0]] + [v for v in scored.values() if v is not None]))


def test_the_cli_runs_random_search_at_the_runs_cost_as_a_control(tmp_path, capsys):
    """``arena search --controls``: random search (random_control) with the run's cost in evaluations as its budget,
    on the same search half, chosen by the same rule, printed below the run."""
    from cachecraft_lib.cli import build_parser
    from cachecraft_lib.cli.arena_search import _cmd_search
    from cachecraft_lib.search.random_control import CONTROL_TAG, search_budget

    args = build_parser().parse_args([
        "arena", "search", "--board", "A", "--profile", "smoke", "--root", str(tmp_path / "arena"), "--iterations", "3",
        "--population", "4", "--controls", "--top", "2", "--out", str(tmp_path / "run")])
    try:
        assert _cmd_search(args) == 0
    finally:
        for guard in list(dev_only._active):  # the CLI leaves its guard in place for the process: end it here
            dev_only.uninstall(guard)
    control = tmp_path / "run_random"
    assert f"control={CONTROL_TAG}" in (control / "run_info.txt").read_text()
    assert len(load_run(control).trace) == search_budget(tmp_path / "run") >= 1
    assert (control / "selected" / "program.py").exists() and (tmp_path / "run" / "selected" / "program.py").exists()
    printed = capsys.readouterr().out
    assert str(control) in printed and str(tmp_path / "run") in printed


def test_the_dev_context_ids_follow_from_the_boards_settings(fitness):
    """``selection.dev_context_ids`` (no model, nothing drawn) names exactly the dev contexts ``Arena.items``
    draws: what a reader (and the registration check) compares a run's fitness_contexts.txt and its selection
    file with, through ``split_dev``."""
    ids = selection.dev_context_ids(fitness.board)
    drawn = fitness.items.drop_duplicates("context_id")
    assert sorted(zip(ids.task, ids.context_id, strict=True)) == sorted(zip(drawn.task, drawn.context_id, strict=True))
