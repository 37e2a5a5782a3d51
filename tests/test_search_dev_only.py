"""The search never sees test items (issue 49, red team r6), without a model: a ``BoardFitness`` refuses items
that are not the board's dev split; only ``dev_only.dev_fitness`` marks a fitness ``guarded`` and a
pre-registered ``board_search`` takes no other; the guard refuses the arena's own ways to a test seed or test
items (and puts everything back); ``cachecraft evolve --board``'s evaluator is built behind the guard."""

from __future__ import annotations

import secrets
from types import SimpleNamespace

import pandas as pd
import pytest

from cachecraft_lib.arena.boards import items as items_mod
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.boards.boards import load_board
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search import board_fitness, dev_only, preregister, selection, worker
from cachecraft_lib.search.board_fitness import BoardFitness
from cachecraft_lib.search.board_search import board_search
from cachecraft_lib.search.seeds import seed_path

BOARD = load_board("smoke", "A")


def _items(split: str | None = "dev", seed: int | None = None) -> pd.DataFrame:
    rows = pd.DataFrame([{"task": t, "context_id": f"1024/{t}/{i}", "overall": 0.5}
                         for t in ("niah_single_1", "qa_1") for i in range(2)])
    if split is not None:
        rows.attrs.update(split=split, board="A", seed=seed)
    return rows


class Idle:
    context_runs = 0  # what the engines read to count evaluations; nothing runs here

    def close(self) -> None:
        pass


class PartsArena:
    """Hands out prepared dev parts, as ``Arena`` would (no model, nothing drawn)."""

    def board(self, name: str):
        return BOARD

    def items(self, board, split: str) -> pd.DataFrame:
        assert split == "dev"
        return _items(seed=items_mod.split_seed(board, "dev"))

    def dev_baselines(self, board) -> pd.DataFrame:
        return _items(None)

    def model(self, board):
        return "model", "tokenizer"


@pytest.fixture
def guard():
    """The guard for one test, always taken down after it (and checked gone)."""
    g = dev_only.install()
    yield g
    dev_only.uninstall(g)
    assert not dev_only.active() and splits.SPLIT_GUARDS == []


@pytest.fixture
def guarded_fitness(monkeypatch, guard):
    monkeypatch.setattr(board_fitness, "PopulationRunner", lambda model, tokenizer, board: Idle())
    return dev_only.dev_fitness("A", "smoke", arena=PartsArena(), gate=0.0)


def _evaluated(fitness):
    """``fitness`` whose evaluation answers at once (every program valid, fitness 0.5)."""
    fitness.evaluate = lambda sources, full=True: [
        SimpleNamespace(fitness=0.5, gate_score=0.5, valid=True, passed_gate=True, name=f"cand-{i}",
                        failure_kind=None, reason="") for i, _ in enumerate(sources)]
    return fitness


def _plan_event(tmp_path) -> dict:
    plan = preregister.make_plan("A", "smoke", "v1", seed_path("v1").read_text(), 1, 2, [0], True,
                                 selection.SPLIT_SEED, 2, selection.rule_text(), [])
    return preregister.record_plan(Ledger(tmp_path / "ledger.jsonl"), plan)


@pytest.mark.parametrize("case", ["test items", "items saying no split", "dev items of another seed",
                                  "test baselines"])
def test_a_fitness_built_from_parts_refuses_anything_but_the_boards_dev_split(case):
    items, base = {"test items": (_items("test"), _items()), "items saying no split": (_items(None), _items()),
                   "dev items of another seed": (_items(seed=123), _items()),
                   "test baselines": (_items(), _items("test"))}[case]
    with pytest.raises(ValueError, match="refused"):
        BoardFitness(object(), BOARD, items, base, Idle())
    fit = BoardFitness(object(), BOARD, _items(seed=items_mod.split_seed(BOARD, "dev")), _items(None), Idle())
    assert fit.gate_ids == ["1024/niah_single_1/0", "1024/qa_1/0"] and not fit.guarded  # dev parts: accepted


def test_only_dev_fitness_marks_a_fitness_guarded(guarded_fitness):
    assert guarded_fitness.guarded and guarded_fitness.base.attrs["split"] == "dev"
    assert not BoardFitness(object(), BOARD, _items(), _items(), Idle()).guarded


def test_a_preregistered_run_takes_only_the_guarded_fitness(tmp_path, guarded_fitness):
    event = _plan_event(tmp_path)
    parts = _evaluated(BoardFitness(object(), BOARD, _items(), _items(), Idle()))
    stub = SimpleNamespace(items=_items("test"), gate=0.0, evaluate=parts.evaluate)  # r6's stub: test items
    for fitness, why in [(parts, "guarded"), (stub, "'test' split")]:
        with pytest.raises(ValueError, match=why):
            board_search("A", "v1", 1, 2, tmp_path / "refused", "smoke", fitness=fitness, progress=False,
                         plan_event=event)
        assert not (tmp_path / "refused").exists()  # refused before the run folder is written
    with pytest.raises(ValueError, match="'test' split"):  # test items are refused without a plan too
        board_search("A", "v1", 1, 2, tmp_path / "refused", "smoke", fitness=stub, progress=False)
    with pytest.raises(ValueError, match="board A's, the run board B_offline's"):
        board_search("B_offline", "v1", 1, 2, tmp_path / "refused", "smoke", fitness=_evaluated(guarded_fitness),
                     progress=False, plan_event=event)
    run = board_search("A", "v1", 1, 2, tmp_path / "run", "smoke", fitness=guarded_fitness, progress=False,
                       plan_event=event, engine="generational")  # the stand-in scores through evaluate only
    # item 2: the run records the contexts of the fitness it used, one per line, in the items' order
    assert (run / "fitness_contexts.txt").read_text().splitlines() == list(dict.fromkeys(guarded_fitness.items.context_id))
    assert "fitness=board A dev items (smoke), 4 contexts" in (run / "run_info.txt").read_text()


def test_the_guard_refuses_the_arenas_own_ways_to_the_test_split_and_puts_them_back(guard):
    secret = secrets.token_bytes(32)
    for reach in (lambda: items_mod.split_seed(BOARD, "test", secret, 1), lambda: splits.test_seed(secret, "A", 1),
                  lambda: items_mod.board_items(BOARD, "test", None, secret)):
        with pytest.raises(dev_only.SecretUnreachable, match="dev split"):
            reach()
    assert items_mod.split_seed(BOARD, "dev") == splits.dev_seed("A")  # the dev split is untouched
    dev_only.uninstall(guard)
    assert items_mod.split_seed(BOARD, "test", secret, 1) == splits.test_seed(secret, "A", 1)  # the arena's, as before


def test_evolve_boards_evaluator_is_built_behind_the_guard(monkeypatch):
    seen = {}

    def loader(board, profile, **kwargs):
        seen.update(active=dev_only.active(), board=board, profile=profile, **kwargs)
        return SimpleNamespace(gate=0.1)

    monkeypatch.setattr(board_fitness, "load_board_fitness", loader)
    monkeypatch.setattr(worker, "load_board_fitness", loader, raising=False)  # the old direct import, if any
    settings = SimpleNamespace(extras={"board": "A", "profile": "smoke", "arena_root": None},
                               seed_program="seed.py", gate=None)
    try:
        built = worker.board_evaluator(settings)
        assert seen["active"] and seen["board"] == "A" and seen["seed_program"] == "seed.py"
        assert built.guarded  # through dev_fitness
    finally:
        for g in list(dev_only._active):
            dev_only.uninstall(g)


def test_board_search_from_python_holds_the_guard_at_every_childs_evaluation(tmp_path):
    """Red team 2: ``board_search`` called without the guard installed held it only while it built the fitness; a
    spy fitness records whether the guard is active at each evaluation (the seed's and every child's), and the
    guard is taken down after the search, on error too."""
    assert not dev_only.active()
    seen = []

    def spy(sources, full=True):
        seen.append(dev_only.active())
        return _evaluated(SimpleNamespace()).evaluate(sources)

    fitness = SimpleNamespace(items=_items(), gate=0.0, evaluate=spy, runner=Idle())
    board_search("A", "v1", 2, 2, tmp_path / "run", "smoke", fitness=fitness, progress=False,
                 engine="generational")  # the spy sees evaluate; the halving engine's runs are under the same guard
    assert len(seen) == 3 and all(seen)  # the seed, then one batch per generation
    assert not dev_only.active() and splits.SPLIT_GUARDS == []

    def crash(sources, full=True):
        seen.append(dev_only.active())
        raise RuntimeError("child crashed")

    with pytest.raises(RuntimeError, match="child crashed"):
        board_search("A", "v1", 1, 2, tmp_path / "crash", "smoke", progress=False, engine="generational",
                     fitness=SimpleNamespace(items=_items(), gate=0.0, evaluate=crash, runner=Idle()))
    assert seen[-1] and not dev_only.active() and splits.SPLIT_GUARDS == []
