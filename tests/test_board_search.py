"""The board search (search.board_search) on smoke board A: deterministic for a seed, never reads the test split."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.search.board_fitness import BoardFitness
from cachecraft_lib.search.board_search import board_search
from cachecraft_lib.search.runlog import load_run
from cachecraft_lib.search.seeds import seed_path

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


@pytest.fixture(scope="module")
def fitness(tmp_path_factory):
    return BoardFitness("A", profile="smoke", root=tmp_path_factory.mktemp("arena"), seed_program=seed_path("v1"))


def test_deterministic_and_dev_only(fitness, tmp_path, monkeypatch):
    def no_test(self, board, split, *args, **kwargs):
        assert split != "test", "the search asked for the test split"
        return original(self, board, split, *args, **kwargs)

    original = Arena.items
    monkeypatch.setattr(Arena, "items", no_test)
    runs = [board_search("A", "v1", 2, 3, tmp_path / f"run{i}", "smoke", random_seed=5, fitness=fitness,
                         progress=False) for i in (0, 1)]
    traces = [(r / "evolution_trace.jsonl").read_text() for r in runs]
    assert traces[0] == traces[1] and len(traces[0].splitlines()) == 6
    assert (runs[0] / "best" / "best_program.py").read_text() == (runs[1] / "best" / "best_program.py").read_text()
    other = board_search("A", "v1", 1, 3, tmp_path / "other", "smoke", random_seed=6, fitness=fitness, progress=False)
    assert (other / "evolution_trace.jsonl").read_text() != "\n".join(traces[0].splitlines()[:3]) + "\n"
    run = load_run(runs[0])
    assert run.trace.child_id.is_unique and set(run.trace.generation) == {1, 2}
    gens = pd.read_csv(runs[0] / "generations.csv")
    assert list(gens.generation) == [0, 1, 2] and gens.best.is_monotonic_increasing
    best = json.loads((runs[0] / "best" / "best_program_info.json").read_text())
    assert best["fitness"] == pytest.approx(gens.best.iloc[-1])
    changes = [json.loads(line)["llm_response"] for line in traces[0].splitlines()]
    assert all(c.startswith("Proposed change: ") for c in changes)
