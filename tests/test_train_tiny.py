"""The training recipe runs, checkpoints atomically and resumes where it stopped (tiny sizes)."""

from __future__ import annotations

import json
import random

import pytest

from cachecraft_lib.ruler.tasks import ENTITY_DOC, GENERATORS, TaskState
from cachecraft_lib.ruler.templates import split_context_question
from cachecraft_lib.tiny.train import Recipe, Stage, _lr, _stage, qa_extra_questions, train

ASSET_TOKENIZER = "tests/assets/tokenizer"


def _recipe(steps: int) -> Recipe:
    return Recipe(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                  batch_tokens=512).scaled(steps)


def test_scaled_recipe_keeps_every_stage_and_anneals_to_zero():
    recipe = Recipe().scaled(56)
    ends = [s.until for s in recipe.stages]
    assert ends == sorted(ends) and ends[-1] == 56 and len(set(ends)) == len(ends)
    assert [_stage(recipe, s).tasks for s in (0, 55)] == [recipe.stages[0].tasks, recipe.stages[-1].tasks]
    lrs = [_lr(recipe, s) for s in range(57)]
    assert max(lrs) <= recipe.lr and lrs[-1] == 0.0 and lrs[-2] < lrs[len(lrs) // 2]
    base = recipe.base_steps
    assert lrs[base - 1] < 0.1 * recipe.lr  # the base run anneals before the refine cycle
    assert max(lrs[base:]) == pytest.approx(recipe.refine_lr)  # which re-warms, then cools to 0


def test_weighted_stage_never_picks_a_zero_weight_task():
    stage = Stage(10, ("vt", "qa_1"), (512,), weights=(0.0, 1.0))
    rng = random.Random(0)
    assert {stage.pick_task(["vt", "qa_1"], rng) for _ in range(50)} == {"qa_1"}
    assert {Stage(10, ("vt", "qa_1"), (512,)).pick_task(["vt", "qa_1"], rng) for _ in range(50)} == {"vt", "qa_1"}


def test_dense_qa_questions_ask_other_documents_with_their_true_answers():
    rng = random.Random(3)
    text, _ = GENERATORS["qa_1"].build(12, rng, TaskState(1024, 7))
    context, question, prefix = split_context_question(text, "qa_1")
    facts = {name: (city, year, founder, product) for name, city, year, founder, product in ENTITY_DOC.findall(context)}
    extra = qa_extra_questions(context, question, prefix, rng, limit=5)
    assert len(extra) == 5 and len(facts) == 12
    for q, p, answers in extra:
        assert p == prefix and q.startswith(question[: question.rindex("Question:")])
        name = next(n for n in facts if n in q)
        assert name not in question and answers[0] in facts[name]


@pytest.mark.slow
def test_train_checkpoints_and_resumes(tmp_path):
    out = train(tmp_path, _recipe(2), tokenizer_dir=ASSET_TOKENIZER, save_every=1, threads=1)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["step"] == 2 and (out / "model.safetensors").exists() and (out / ".optim.pt").exists()
    assert not list(out.glob("*.tmp"))
    with pytest.raises(ValueError, match="another recipe"):
        train(tmp_path, _recipe(3), save_every=1, threads=1)  # a changed recipe is refused, not mixed in
    log = (out / "train_log.csv").read_text().splitlines()
    assert log[0].startswith("step,loss") and [r.split(",")[0] for r in log[1:]] == ["1", "2"]


@pytest.mark.slow
def test_interrupted_training_resumes_from_its_checkpoint(tmp_path):
    train(tmp_path, _recipe(3), tokenizer_dir=ASSET_TOKENIZER, save_every=10, threads=1, max_minutes=0)
    assert json.loads((tmp_path / "trainer_state.json").read_text())["step"] == 1  # stopped at a checkpoint
    train(tmp_path, _recipe(3), save_every=10, threads=1)
    assert json.loads((tmp_path / "trainer_state.json").read_text())["step"] == 3
    steps = [r.split(",")[0] for r in (tmp_path / "train_log.csv").read_text().splitlines()[1:]]
    assert steps == ["1", "2", "3"]
