"""The search's board fitness is `arena dev`'s score, and the population path equals one-at-a-time (smoke board A).

The refusal tests put the bad candidate in the same population as good ones, with no gate result kept from an
earlier call (``fresh``), check through the runner that they really shared each pass, and compare the good ones'
scores with their scores alone on the one-at-a-time path (``solo``).

Only the first test needs every dev context (its reference is ``arena dev`` itself); the others compare the two
paths on ``part``: the same board restricted (``contexts=``) to its gate contexts and one more, so that every
candidate still goes through the gate and stage 2 and a run still spans several contexts, at 4 of the 6
contexts' cost (the same gate contexts, hence the full board's gate, without running the seed again)."""

import pytest

from cachecraft_lib.arena.board_runner import submission_contender
from cachecraft_lib.search.board_fitness import candidate_name, load_board_fitness, offline_population
from cachecraft_lib.search.seeds import seed_path

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def fitness(tmp_path_factory):
    return load_board_fitness("A", profile="smoke", root=tmp_path_factory.mktemp("arena"), seed_program=seed_path("v1"))


@pytest.fixture(scope="module")
def part(fitness):
    """The board on its gate contexts and the first other dev context, sharing ``fitness``'s arena (model, items,
    baselines); its gate contexts are the full board's, so its gate is too."""
    rest = fitness.rest_items().context_id.iloc[0]
    part = load_board_fitness("A", arena=fitness.arena, seed_program=seed_path("v1"), gate=fitness.gate,
                              contexts=[*fitness.gate_ids, rest])
    assert part.gate_ids == fitness.gate_ids and part.items.context_id.nunique() == len(fitness.gate_ids) + 1
    return part


@pytest.fixture(scope="module")
def generation():
    return offline_population(seed_path("v1").read_text(), 3, random_seed=1)


@pytest.fixture(scope="module")
def solo(part, generation):
    """Each of the generation's first two programs alone, one at a time through ``Arena.run``: the reference."""
    return [part.evaluate_one(s) for s in generation[:2]]


def fresh(fitness, sources, monkeypatch) -> tuple[list, list[set[str]]]:
    """``fitness.evaluate(sources)`` with no stage-1 result kept from an earlier call, and the candidate names of
    each population pass the runner made (so a test can check the bad candidate shared the good ones' pass)."""
    passes: list[set[str]] = []
    run = fitness.runner.run

    def spy(items, candidates, progress=False):
        passes.append({c.name for c in candidates})
        return run(items, candidates, progress)

    monkeypatch.setattr(fitness.runner, "run", spy)
    fitness._gates.clear()
    return fitness.evaluate(sources), passes


def assert_unchanged(alone, mixed):
    """The good candidates of a mixed population score exactly as each did alone."""
    for a, m in zip(alone, mixed, strict=True):
        assert m.valid and m.stage == a.stage, (a, m)
        assert (m.gate_score, m.fitness) == pytest.approx((a.gate_score, a.fitness), abs=1e-12)


def test_fitness_is_arena_dev_score(fitness):
    source = seed_path("v1").read_text()
    result = fitness.evaluate([source], full=True)[0]
    assert result.valid and result.stage == 2, result
    converted = fitness.convert(source)
    report = fitness.arena.dev("A", submission_contender(converted.submission))
    assert result.fitness == pytest.approx(float(report["scores"].loc[converted.name, "overall"]), abs=1e-12)
    assert result.report["gain"].point == pytest.approx(report["gain"].point, abs=1e-12)


def test_population_equals_one_at_a_time(part, generation, solo, monkeypatch):
    batched, passes = fresh(part, generation, monkeypatch)
    single = solo + [part.evaluate_one(generation[2])]
    assert len({r.name for r in batched}) == 3 and passes[0] == {r.name for r in batched}
    for b, s in zip(batched, single, strict=True):
        assert (b.name, b.valid, b.stage) == (s.name, s.valid, s.stage)
        assert b.gate_score == pytest.approx(s.gate_score, abs=1e-12)
        assert (b.fitness is None) == (s.fitness is None)
        if b.fitness is not None:
            assert b.fitness == pytest.approx(s.fitness, abs=1e-12)


def test_hostile_candidate_refused_others_unchanged(part, generation, solo, monkeypatch):
    seed = seed_path("v1").read_text()
    hostile = seed.replace("    return topk_tokens(scores, ctx)", "    return topk_tokens(scores, ctx) + ctx.L")
    assert hostile != seed
    mixed, passes = fresh(part, [generation[0], hostile, generation[1]], monkeypatch)
    assert passes[0] == {r.name for r in mixed}  # one gate pass, the hostile candidate inside it
    assert not mixed[1].valid and mixed[1].failure_kind == "out_of_range", mixed[1]
    assert_unchanged(solo, [mixed[0], mixed[2]])


def test_stage0_refuses_edits_outside_the_block(part):
    result = part.evaluate([seed_path("v5").read_text()])[0]
    assert not result.valid and result.failure_kind == "stage0"


def _edited(old: str, new: str) -> str:
    seed = seed_path("v1").read_text()
    assert old in seed
    return seed.replace(old, new, 1)


def test_hang_and_memory_refused_others_unchanged(part, generation, solo, monkeypatch):
    hang = _edited("def score_tokens(ctx):\n", "def score_tokens(ctx):\n    while True:\n        pass\n")
    memory = _edited("def score_tokens(ctx):\n", "def score_tokens(ctx):\n    _ = np.ones(1 << 34)\n")
    monkeypatch.setattr(part, "limits", {"timeout_s": 1.0, "memory_mb": 256})
    mixed, passes = fresh(part, [generation[0], hang, memory, generation[1]], monkeypatch)
    assert passes[0] == {r.name for r in mixed}
    assert not mixed[1].valid and mixed[1].failure_kind == "timeout", mixed[1]
    assert not mixed[2].valid and mixed[2].failure_kind == "memory", mixed[2]
    assert_unchanged(solo, [mixed[0], mixed[3]])


def test_state_does_not_cross_contexts(part):
    """A program that changes once it has seen one context's calls (4 layers x 3 budgets) scores the same on both
    paths: the population path reloads the method before each context as the arena starts a fresh sandbox."""
    calls = len(part.board.budgets) * part.runner.model.config.num_hidden_layers
    stateful = _edited("def score_tokens(ctx):\n",
                       f"SEEN = []\n\n\ndef score_tokens(ctx):\n    SEEN.append(1)\n    if len(SEEN) > {calls}:\n"
                       "        return -ctx.position\n")
    assert part.items.context_id.nunique() > 1
    batched = part.evaluate([stateful])[0]
    single = part.evaluate_one(stateful)
    assert batched.valid and single.valid, (batched, single)
    assert (batched.gate_score, batched.fitness) == (single.gate_score, single.fitness)


def test_a_program_changing_the_feature_code_scores_as_in_the_arena(part, generation, solo, monkeypatch):
    """The features are built outside once for all candidates; a program that rebinds what that code reads
    (the preamble's N_SINK, which sink_mask uses; numpy's norm, which key_norm uses) goes, inside a population,
    one at a time through the arena's path, so its score is arena dev's; the population's other members still
    share one pass. The reference is the arena path's own result for each of them, taken as it is returned
    (``BoardFitness.evaluate_one`` is the arena's path, whose sandbox builds the features itself), so neither
    program runs twice."""
    from cachecraft_lib.search.policy_batch import shares_features

    seed = seed_path("v1").read_text()
    sinks = _edited('SELECTION = "tokenwise"\n', 'SELECTION = "tokenwise"\nN_SINK = 256\n')
    patched = _edited('SELECTION = "tokenwise"\n', 'SELECTION = "tokenwise"\nnp.linalg.norm = np.sum\n')
    assert shares_features(part.convert(seed).submission.source)
    assert not shares_features(part.convert(sinks).submission.source)
    assert not shares_features(part.convert(patched).submission.source)
    alone: dict[str, tuple] = {}  # source -> (full, valid, stage, gate score, fitness) as the arena's path returned it
    evaluate_one = part.evaluate_one

    def arena_path(source, full=True):
        single = evaluate_one(source, full)
        assert source not in alone, "evaluated twice on the arena's path"
        alone[source] = (full, single.valid, single.stage, single.gate_score, single.fitness)
        return single

    monkeypatch.setattr(part, "evaluate_one", arena_path)
    mixed, passes = fresh(part, [generation[0], sinks, patched, generation[1]], monkeypatch)
    assert all(candidate_name(s) not in p for s in (sinks, patched) for p in passes)
    assert set(alone) == {sinks, patched}  # only these two, each once, on the arena's path
    for source, result in zip((sinks, patched), mixed[1:3], strict=True):
        full, valid, stage, gate_score, fitness = alone[source]
        assert full and valid and stage == (2 if gate_score >= part.gate else 1), alone[source]
        assert result.valid and (result.stage, result.gate_score, result.fitness) == (stage, gate_score, fitness)
    assert_unchanged(solo, [mixed[0], mixed[3]])


def test_a_candidate_that_fails_to_load_is_refused_others_unchanged(part, generation, solo, monkeypatch):
    """The population's sandboxes load side by side (``PopulationRunner._start_all``); a method that raises while
    loading is refused there, with its own reason, and the other candidates' scores do not change."""
    broken = _edited('SELECTION = "tokenwise"\n', 'SELECTION = "tokenwise"\n_BROKEN = 1 // 0\n')
    mixed, passes = fresh(part, [generation[0], broken, generation[1]], monkeypatch)
    assert passes[0] == {r.name for r in mixed}
    assert not mixed[1].valid and mixed[1].failure_kind == "crash", mixed[1]
    assert "ZeroDivisionError" in mixed[1].reason, mixed[1].reason
    assert_unchanged(solo, [mixed[0], mixed[2]])
