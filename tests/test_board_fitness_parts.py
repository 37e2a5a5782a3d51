"""``BoardFitness`` is built from prepared parts and loads nothing; ``load_board_fitness`` is what loads, in the
order its docstring says (fast: no model, no items drawn, no sandbox)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from cachecraft_lib.arena.boards.boards import load_board
from cachecraft_lib.search import board_fitness
from cachecraft_lib.search.board_fitness import BoardFitness, load_board_fitness


class Unloadable:
    """An arena whose every attribute raises: a fitness built from parts must never reach it."""

    def __getattr__(self, name: str):
        raise AssertionError(f"building a BoardFitness from parts reached the arena ({name})")


class IdleRunner:
    """A population runner that counts ``close`` and refuses to run anything."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def run(self, *_args, **_kwargs):
        raise AssertionError("a candidate refused at stage 0 reached the runner")


class RecordingArena:
    """An arena that hands out prepared parts and records what was loaded, in order."""

    def __init__(self, board, items: pd.DataFrame, base: pd.DataFrame) -> None:
        self.spec, self.dev_items, self.base, self.loads = board, items, base, []

    def board(self, name: str):
        self.loads.append(("board", name))
        return self.spec

    def items(self, board, split: str) -> pd.DataFrame:
        self.loads.append(("items", split))
        return self.dev_items

    def dev_baselines(self, board) -> pd.DataFrame:
        self.loads.append(("dev_baselines", board.name))
        return self.base

    def model(self, board):
        self.loads.append(("model", board.name))
        return "model", "tokenizer"


def _rows(contexts: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame([{"task": t, "context_id": c, "overall": 0.5} for t, c in contexts])


ITEMS = _rows([("niah", "n0"), ("niah", "n1"), ("vt", "v0"), ("niah", "n1"), ("vt", "v1")])
ITEMS.attrs["split"] = "dev"  # as Arena.items says of its dev items (a BoardFitness refuses any other split)


def test_built_from_parts_it_loads_and_runs_nothing():
    runner = IdleRunner()
    fit = BoardFitness(Unloadable(), load_board("smoke", "A"), ITEMS, ITEMS, runner)
    assert fit.gate_ids == ["n0", "v0"]  # the first dev context of each task
    assert set(fit.gate_items().context_id) == {"n0", "v0"} and set(fit.rest_items().context_id) == {"n1", "v1"}
    assert fit.gate == 0.0 and fit.seed_gate() == 0.0  # no seed program: no gate run
    refused = fit.evaluate(["this is not a program"])[0]
    assert not refused.valid and refused.stage == 0 and refused.failure_kind == "stage0"
    assert runner.closed == 1  # the population's sandboxes are ended after the pass, even with nothing run


def test_the_loader_loads_in_order_and_keeps_the_half(monkeypatch):
    monkeypatch.setattr(board_fitness, "PopulationRunner", lambda model, tokenizer, board: (model, tokenizer))
    arena = RecordingArena(load_board("smoke", "A"), ITEMS, ITEMS)
    fit = load_board_fitness("A", arena=arena, gate=0.25, contexts=["n0", "n1", "v1"], limits={"timeout_s": 2.0})
    assert [what for what, _ in arena.loads] == ["board", "items", "dev_baselines", "model"]
    assert set(fit.items.context_id) == set(fit.base.context_id) == {"n0", "n1", "v1"}
    assert fit.gate_ids == ["n0", "v1"] and fit.gate == 0.25 and fit.runner == ("model", "tokenizer")
    assert fit.limits == {"timeout_s": 2.0} and fit.seed_source is None
    with pytest.raises(ValueError, match="no context"):
        load_board_fitness("A", arena=RecordingArena(arena.spec, ITEMS, ITEMS), gate=0.0, contexts=["n0", "x9"])


def test_the_loader_refuses_a_decode_time_board_before_loading_anything():
    arena = RecordingArena(replace(load_board("smoke", "A"), setting="decode_time"), ITEMS, ITEMS)
    with pytest.raises(ValueError, match="prefill boards"):
        load_board_fitness("A", arena=arena, gate=0.0)
    assert arena.loads == [("board", "A")]
