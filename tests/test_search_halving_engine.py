"""The halving engine's parts (issue 56, item 3): successive halving over dev contexts gives a surviving child exactly
the plain cascade's result and charges a culled one only its contexts; TPE over the weights is deterministic for a
seed; a lagging island restarts from the seed, the leading one never."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from cachecraft_lib.search.board_fitness import apply_diff
from cachecraft_lib.search.constants_tpe import ConstantsTPE, structure_key, weights_of, with_weights
from cachecraft_lib.search.halving import context_order, rung_sizes
from cachecraft_lib.search.islands import Archipelago, Entry
from cachecraft_lib.search.mutator import propose
from cachecraft_lib.search.seeds import seed_path

SEED = seed_path("v1").read_text()


def test_rungs_spread_over_tasks_and_start_with_the_gate_contexts():
    items = pd.DataFrame({"task": ["a", "a", "b", "b", "c", "c", "a"], "context_id": list("1234567")})
    assert context_order(items) == ["1", "3", "5", "2", "4", "6", "7"]
    assert rung_sizes(16, 8) == [4, 8, 16] and rung_sizes(32, 8) == [4, 8, 16, 32]
    assert rung_sizes(6, 3) == [1, 2, 4, 6] and rung_sizes(3, 3) == [1, 2, 3] and rung_sizes(1, 1) == [1]


def test_weights_are_rewritten_alone_and_share_a_structure():
    params = {k: v * (i + 1) for i, (k, v) in enumerate(weights_of(SEED).items())}
    child = with_weights(SEED, params)
    assert structure_key(child) == structure_key(SEED) and child != SEED
    assert sum(weights_of(child).values()) == pytest.approx(1.0, abs=2e-3)
    assert [a for a, b in zip(SEED.splitlines(), child.splitlines(), strict=True) if a != b] == \
        [line for line in SEED.splitlines() if line.startswith("WEIGHTS = ")]
    rng = random.Random(3)
    while True:  # a structural edit changes the key
        diff, change = propose(SEED, rng, structural=True)
        other = apply_diff(SEED, diff)
        if "weight" not in change:
            break
    assert structure_key(other) != structure_key(SEED)


def _asks(seed: int, n: int = 8) -> list[str]:
    tpe = ConstantsTPE(seed)
    tpe.remember(SEED, 0.4)
    out = []
    for i in range(n):
        asked = tpe.ask(SEED)
        out.append(asked.code)
        if i % 3 == 0:
            tpe.tell(asked, 0.3 + 0.02 * i, None, 3)
        else:
            tpe.tell(asked, None, 0.2 + 0.01 * i, i % 2)
    return out


def test_tpe_is_deterministic_for_a_seed_and_learns_from_scores():
    assert _asks(1) == _asks(1) and _asks(1) != _asks(2)
    tpe = ConstantsTPE(0)
    tpe.remember(SEED, 0.4)
    asked = tpe.ask(SEED)
    tpe.tell(asked, None, 0.25, 1)
    trials = tpe.study(structure_key(SEED)).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"] and trials[1].intermediate_values == {1: 0.25}


def test_a_lagging_island_restarts_from_the_seed_and_the_leader_never():
    seed = Entry(0.3, "seed", "s")
    arch = Archipelago.start(2, seed, patience=2)
    arch.islands[0].add([Entry(0.5, "a", "a")])
    for _ in range(2):
        assert not arch.islands[1].add([Entry(0.1, "b", "b")])
        arch.islands[0].add([])
    assert arch.restart_lagging() == [1]
    assert arch.islands[1].elite == [seed] and arch.islands[1].restarts == 1 and arch.islands[0].restarts == 0
    assert arch.best.child_id == "a"


# ------------------------------------------------------------------------------- on the smoke board (model)
@pytest.fixture(scope="module")
def fitness(tmp_path_factory):
    from cachecraft_lib.search import dev_only

    with dev_only.dev_only():
        return dev_only.dev_fitness("A", "smoke", root=tmp_path_factory.mktemp("arena"), seed_program=seed_path("v1"))


@pytest.fixture(scope="module")
def generation():
    from cachecraft_lib.search.board_fitness import offline_population

    return offline_population(SEED, 6, random_seed=4)


@pytest.mark.slow
def test_a_full_evaluation_through_halving_equals_the_plain_one(fitness, generation):
    from cachecraft_lib.search.halving import Halving

    for program in generation[:3]:
        screened = Halving(fitness).screen([program])[0]  # alone: it survives every rung
        plain = fitness.evaluate([program])[0]
        assert screened.full and screened.result.fitness == plain.fitness
        assert screened.result.gate_score == plain.gate_score and screened.result.stage == plain.stage == 2
        pd.testing.assert_frame_equal(screened.result.report["units"], plain.report["units"])


@pytest.mark.slow
def test_halving_culls_most_children_and_charges_their_share(fitness, generation):
    from cachecraft_lib.search.halving import Halving

    halving = Halving(fitness)
    assert halving.sizes == [1, 2, 4, 6]  # smoke board A: 3 tasks x 2 dev contexts
    runs = fitness.runner.context_runs
    screened = halving.screen(generation)
    assert [s.rung for s in screened].count(3) == 1 and sum(s.full for s in screened) == 1  # 6 -> 2 -> 1 -> 1
    assert halving.context_runs == fitness.runner.context_runs - runs == 6 + 2 + 2 + 2
    assert sum(s.contexts_run for s in screened) == halving.context_runs
    culled = [s for s in screened if not s.full]
    assert all(s.result.fitness is None and s.partial is not None and s.result.valid for s in culled)
    full = next(s for s in screened if s.full)
    assert halving.screen([full.source])[0].result is full.result and halving.context_runs == 12  # kept: no run
    again = halving.screen(generation)  # culled children go on from the contexts they hold, charged only the rest
    assert sum(s.contexts_run for s in again) == halving.context_runs - 12 < 12
    assert [s.result.fitness for s in again if s.source == full.source] == [full.result.fitness]


@pytest.mark.slow
def test_the_gate_stops_a_child_as_the_plain_cascade_does(fitness, generation):
    from cachecraft_lib.search.halving import Halving

    gate, gated = fitness.gate, dict(fitness._gates)
    try:
        fitness.gate = 10.0  # above any score: every child stops at the gate
        fitness._gates.clear()  # the plain cascade keeps gate results (with the gate of their time) by program
        screened = Halving(fitness).screen(generation[:1])[0]
        plain = fitness.evaluate(generation[:1])[0]
    finally:
        fitness.gate = gate
        fitness._gates.clear()
        fitness._gates.update(gated)
    assert not screened.result.passed_gate and not plain.passed_gate
    assert screened.result.fitness is None and plain.fitness is None
    assert screened.result.gate_score == plain.gate_score and screened.result.stage == plain.stage == 1
