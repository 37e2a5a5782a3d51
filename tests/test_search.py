"""The search: stage-0 checks, sandboxed candidates, every hack rejected with its reason, gating, a real loop."""

from __future__ import annotations

import math
import random
import time

import pytest

from cachecraft_lib.profiles import EMBEDDED_MODEL, get_profile
from cachecraft_lib.search import mutator, runlog
from cachecraft_lib.search.cascade import CascadeEvaluator, SearchSettings
from cachecraft_lib.search.seeds import SEEDS
from cachecraft_lib.search.static_checks import outside_block, stage0

SEED = SEEDS["v5"].read_text()
CHILD = SEED.replace("WEIGHTS = (0.60, 0.25, 0.15)", "WEIGHTS = (0.6, 0.3, 0.1)")  # a valid edit inside the block
TASKS = ["niah_single_1", "vt"]


@pytest.fixture(scope="module")
def evaluator():
    settings = SearchSettings(model=EMBEDDED_MODEL, length=1024, compression_ratio=0.83, stage1_samples_per_task=1,
                              stage2_samples_per_task=1, tasks=TASKS, max_new_tokens=6, gate=0.0,
                              seed_program=str(SEEDS["v5"]), timeout_s=3.0)
    return CascadeEvaluator(settings)


def test_every_seed_passes_stage0():
    for name, path in SEEDS.items():
        assert stage0(path.read_text(), path.read_text()) == [], name


@pytest.mark.parametrize("source,reason", [
    ("def score_tokens(ctx):\n    return (\n", "syntax error"),
    (SEED.replace("import numpy as np", "import numpy as np\nimport os"), "not allowed: os"),
    (SEED.replace("    return score\n", "    open('/etc/passwd')\n    return score\n"), "open()"),
    (SEED.replace("def select_tokens_to_keep", "def select_tokens"), "select_tokens_to_keep"),
    (SEED.replace("# EVOLVE-BLOCK-END\n", "# EVOLVE-BLOCK-END\nX = 1\n"), "outside the EVOLVE-BLOCK"),
])
def test_stage0_rejections(source, reason):
    problems = stage0(source, SEED)
    assert problems and any(reason in p for p in problems), problems


@pytest.mark.parametrize("name", [h for h in mutator.HACKS if h != "outside_block"])
def test_offline_mutator_repairs_a_hacked_parent(name):
    """A hacked program sampled as a parent is repaired, not mutated further (as an LLM would after INVALID)."""
    import asyncio

    hacked = _apply(SEED, mutator.hack(SEED, name))
    assert "# hack:" in hacked
    prompt = f"# Current Program\n```python\n{hacked}\n```\n"
    reply = asyncio.run(mutator.OfflineMutator().generate_with_context("", [{"role": "user", "content": prompt}], seed=3))
    assert "repair" in reply
    assert runlog.proposed_hack(mutator.hack(SEED, name)).group(1) == name
    assert runlog.proposed_hack(reply) is None  # a repair is not counted as a hack in notebook 05
    assert _apply(hacked, reply) == SEED and stage0(_apply(hacked, reply), SEED) == []


def _apply(code: str, reply: str) -> str:
    search, replace = reply.split("<<<<<<< SEARCH\n")[1].split("\n>>>>>>> REPLACE")[0].split("\n=======\n")
    assert search in code
    return code.replace(search, replace)


def test_offline_mutator_edits_are_valid_and_deterministic():
    import asyncio

    prompt = f"# Current Program\n```python\n{SEED}\n```\n"
    mut = mutator.OfflineMutator()
    a = asyncio.run(mut.generate_with_context("", [{"role": "user", "content": prompt}], seed=7))
    b = asyncio.run(mutator.OfflineMutator().generate_with_context("", [{"role": "user", "content": prompt}], seed=7))
    assert a == b and "<<<<<<< SEARCH" in a
    code = SEED
    for i in range(30):  # a chain of edits always yields a linear scorer that passes stage 0
        diff, _ = mutator.edit_scorer(code, random.Random(i))
        search, replace = diff.split("<<<<<<< SEARCH\n")[1].split("\n>>>>>>> REPLACE")[0].split("\n=======\n")
        assert search in code
        code = code.replace(search, replace)
        assert mutator.parse_scorer(code) is not None and stage0(code, SEED) == []
        assert outside_block(code) == outside_block(SEED)


@pytest.mark.slow
def test_default_gate_is_the_papers_relative_to_the_seed(evaluator):
    from cachecraft_lib.search.cascade import PAPER_GATE, PAPER_SEED_S1

    gate = evaluator._scaled_gate()
    assert gate == round(PAPER_GATE / PAPER_SEED_S1 * evaluator.run_stage(SEED, 1), 2)
    assert gate <= evaluator.seed_s1  # the seed itself always passes, as it did in the paper
    calls = []
    run_stage = evaluator.run_stage
    evaluator.run_stage = lambda source, stage: calls.append(stage) or run_stage(source, stage)
    try:  # OpenEvolve's evaluation of the seed reuses the S1 measured for the gate; a child is measured
        assert evaluator.stage1(SEED)["metrics"]["s1"] == evaluator.seed_s1 and calls == []
        assert evaluator.stage1(CHILD)["metrics"]["valid"] == 1.0 and calls == [1]
    finally:
        del evaluator.run_stage


@pytest.mark.slow
def test_stage_fitness_and_gate_flags(evaluator):
    one = evaluator.stage1(SEED)
    assert one["metrics"]["valid"] == 1.0 and one["metrics"]["combined_score"] == pytest.approx(0.25 * one["metrics"]["s1"])
    assert one["metrics"]["passed_gate"] == 1.0  # gate 0 here
    two = evaluator.stage2(SEED)
    m = two["metrics"]
    assert m["combined_score"] == pytest.approx(0.25 * m["s1"] + 0.75 * m["s2"])
    evaluator.gate = 101.0  # nothing can pass
    try:
        m = evaluator.stage1(CHILD)["metrics"]
        assert m["valid"] == 1.0 and m["passed_gate"] == 0.0  # a valid child, stopped by the gate
    finally:
        evaluator.gate = 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name,kind", [("keep_all", "invariant"), ("duplicate", "invariant"),
                                       ("out_of_range", "invariant"), ("outside_block", "stage0"),
                                       ("tamper", "tamper"), ("memory", "memory"), ("network", "stage0")])
def test_each_hack_is_invalid_with_its_reason(evaluator, name, kind):
    diff = mutator.hack(SEED, name)
    search, replace = diff.split("<<<<<<< SEARCH\n")[1].split("\n>>>>>>> REPLACE")[0].split("\n=======\n")
    result = evaluator.stage1(SEED.replace(search, replace))
    assert result["metrics"]["valid"] == 0.0 and result["metrics"]["combined_score"] == 0.0
    assert result["artifacts"]["failure_kind"] == kind and "INVALID" in result["artifacts"]["invalid"]


@pytest.mark.slow
def test_hanging_candidate_is_killed_and_the_next_runs_normally(evaluator):
    diff = mutator.hack(SEED, "hang")
    search, replace = diff.split("<<<<<<< SEARCH\n")[1].split("\n>>>>>>> REPLACE")[0].split("\n=======\n")
    start = time.time()
    result = evaluator.stage1(SEED.replace(search, replace))
    # refused by the call's CPU-time watchdog (3 s of CPU), not by the sandbox's hour-long wall budget; the wall
    # bound only catches a watchdog that never fires, generous for a loaded machine
    assert result["artifacts"]["failure_kind"] == "timeout", result["artifacts"]
    assert "within 3 s of CPU time: killed" in result["artifacts"]["invalid"], result["artifacts"]["invalid"]
    assert time.time() - start < 300
    assert evaluator.stage1(SEED)["metrics"]["valid"] == 1.0


@pytest.mark.slow
def test_offline_run_writes_a_trace_the_loader_reads(tmp_path):
    from cachecraft_lib.search.evolve import evolve

    profile = get_profile("smoke")
    evolve("v5", 3, tmp_path, profile, mutator="offline", adversarial=0.5)
    run = runlog.load_run(tmp_path)
    assert len(run.trace) == 3 and list(run.trace.iteration) == [1, 2, 3]
    assert run.info["mutator"].startswith("offline-mutator (not an LLM)")
    assert {"fitness", "s1", "valid", "hack", "frc_share", "best_so_far"} <= set(run.trace.columns)
    caught = runlog.hacks_caught(run)
    assert "NOT CAUGHT" not in set(caught.caught_by)
    assert (tmp_path / "checkpoints").exists() and (tmp_path / "best" / "best_program.py").exists()
    assert evolve("v5", 3, tmp_path, profile, mutator="offline", adversarial=0.5) is None  # complete: nothing re-run
    assert len(runlog.load_run(tmp_path).trace) == 3
    evolve("v5", 4, tmp_path, profile, mutator="offline", adversarial=0.5)  # resumed: one more iteration, not four
    assert list(runlog.load_run(tmp_path).trace.iteration) == [1, 2, 3, 4]


def test_runlog_helpers():
    import pandas as pd

    assert runlog.frc_share(("local_attn", "key_norm"), (0.75, 0.25)) == 0.75
    assert math.isnan(runlog.spearman(pd.Series([1, 2]), pd.Series([1, 2])))
    assert runlog.spearman(pd.Series([1, 2, 3, 4]), pd.Series([10, 20, 30, 40])) == pytest.approx(1.0)


@pytest.mark.slow
def test_offline_run_is_reproducible_for_a_seed(tmp_path):
    """`cachecraft evolve` from a shell without PYTHONHASHSEED: the search re-runs itself in a fresh process with
    it (and one worker, seeded ids, CPU-time limits), so two runs give the same run log."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "evolve", "--profile", "smoke", "--iterations", "3",
                        "--adversarial", "0.3", "--out", str(tmp_path / name)], check=True, env=env,
                       capture_output=True)
    cols = ["iteration", "island", "parent_id", "child_id", "fitness", "change", "code"]
    a, b = runlog.load_run(tmp_path / "a").trace[cols], runlog.load_run(tmp_path / "b").trace[cols]
    assert len(a) == 3 and a.equals(b)
    assert runlog.canonical_log(tmp_path / "a") == runlog.canonical_log(tmp_path / "b")
    assert (tmp_path / "a" / "fresh_process_spec.json").exists()  # it did go through the fresh process


def test_openevolve_configs():
    from cachecraft_lib.search.evolve import EVALUATION_BACKSTOP_S, OLLAMA_BASE, OLLAMA_MODEL, build_config

    cfg = build_config(10, "ollama", gate_score=40.0)
    model = cfg.llm.models[0]
    assert model.name == OLLAMA_MODEL and model.api_base == OLLAMA_BASE and model.api_key == "ollama"
    assert cfg.evaluator.cascade_thresholds == [10.0] and cfg.evaluator.parallel_evaluations == 1
    assert cfg.evaluator.timeout == EVALUATION_BACKSTOP_S >= 3600  # a backstop, never a candidate's verdict
    assert cfg.enforce_evolve_blocks and cfg.evolution_trace.enabled and cfg.evolution_trace.include_failures
    assert "EVOLVE-BLOCK" in cfg.prompt.system_message and "INVALID" in cfg.prompt.system_message
    offline = build_config(5, "offline", adversarial=0.2).llm.models[0]
    assert offline.init_client is not None and "not an LLM" in offline.name
    with pytest.raises(ValueError, match="mutator"):
        build_config(5, "gpt")


def test_kept_digest_tells_kept_sets_apart():
    import numpy as np

    from cachecraft_lib.search.samples import kept_digest

    same = [kept_digest([[1, 2, 3], [4, 5]]), kept_digest([np.array([1, 2, 3]), np.array([4, 5], dtype=np.int32)])]
    assert same[0] == same[1]
    others = [kept_digest(k) for k in ([[1, 2], [3, 4, 5]], [[3, 2, 1], [4, 5]], [[1, 2, 3], [4, 6]],
                                       [[1, 2, 3]], None, [None, [4, 5]])]
    assert len({same[0], *others}) == 1 + len(others)


@pytest.mark.slow
def test_a_kept_set_already_answered_is_read_back_with_the_same_score(evaluator):
    """A program keeping the same tokens as one scored before (its weights doubled: the same ranking, exactly)
    gets every answer read back, and the score answering anew gives; another ranking is answered."""
    twin = SEED.replace("WEIGHTS = (0.60, 0.25, 0.15)", "WEIGHTS = (1.20, 0.50, 0.30)")
    first = evaluator.run_stage(SEED, 2)
    before = evaluator.answered
    assert evaluator.run_stage(twin, 2) == first and evaluator.answered == before
    evaluator.memo_answers = False
    try:
        assert evaluator.run_stage(twin, 2) == first
        assert evaluator.answered == before + len(evaluator.stage_rows[2])
    finally:
        evaluator.memo_answers = True
    tokens = SEED.replace('SELECTION = "chunked"', 'SELECTION = "tokens"')  # other kept sets
    keys = len(evaluator._answers)
    evaluator.run_stage(tokens, 2)
    assert len(evaluator._answers) > keys
