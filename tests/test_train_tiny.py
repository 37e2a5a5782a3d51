"""The training recipe runs, checkpoints atomically and resumes where it stopped (tiny sizes)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from itertools import pairwise

import pytest

from cachecraft_lib.ruler.documents import ENTITY_DOC
from cachecraft_lib.ruler.tasks import GENERATORS, TaskState
from cachecraft_lib.ruler.templates import split_context_question
from cachecraft_lib.tiny.recipe import (
    Recipe,
    Stage,
    extends,
    lr_at,
    recipe_from_json,
    recipe_json,
    resumable,
    stage_at,
)
from cachecraft_lib.tiny.samples import SET_TASKS, SampleStream, qa_extra_questions
from cachecraft_lib.tiny.train import train

ASSET_TOKENIZER = "tests/assets/tokenizer"


def _recipe(steps: int) -> Recipe:
    return Recipe(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                  batch_tokens=512).scaled(steps)


def test_scaled_recipe_keeps_every_stage_and_anneals_to_zero():
    recipe = Recipe().scaled(80)
    ends = [s.until for s in recipe.stages]
    assert ends == sorted(ends) and ends[-1] == 80 and len(set(ends)) == len(ends)
    assert [stage_at(recipe, s).tasks for s in (0, 79)] == [recipe.stages[0].tasks, recipe.stages[-1].tasks]
    lrs = [lr_at(recipe, s) for s in range(81)]
    assert max(lrs) <= recipe.lr and lrs[-1] == 0.0 and lrs[-2] < lrs[len(lrs) // 2]
    cycles = (recipe.base_steps, *recipe.refine_ends, recipe.steps)
    assert len(cycles) >= 3 and list(cycles) == sorted(set(cycles))
    assert lrs[recipe.base_steps - 1] == min(lrs[:recipe.base_steps]) < 0.25 * recipe.lr  # the base run anneals
    for start, end in pairwise(cycles):  # each re-warms to refine_lr, then cools towards 0 at its end
        cycle = lrs[start:end]
        assert max(cycle) == pytest.approx(recipe.refine_lr)
        assert cycle[-1] == min(cycle[len(cycle) // 2:]) < 0.5 * recipe.refine_lr


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


@pytest.mark.parametrize("task", sorted(SET_TASKS))
def test_ordered_sets_write_set_answers_in_the_order_the_context_shows_them(task):
    from transformers import AutoTokenizer

    stream = SampleStream(AutoTokenizer.from_pretrained(ASSET_TOKENIZER), seed=1)

    def rendered(ordered: bool) -> tuple[str, list[str]]:
        row = stream.sample(task, 1024, random.Random(11), extra_questions=0, ordered_sets=ordered)
        text = stream.tokenizer.decode(row.ids, skip_special_tokens=True)
        prefix_end = text.rindex("are:" if task == "cwe" else "are")
        return text[:prefix_end], [w.strip(" .,") for w in text[prefix_end + 4:].replace(" and ", " ").split()
                                   if not w[0].isdigit() or task != "cwe"]

    own_context, ordered = rendered(True)
    own_context = own_context[own_context.rfind(SET_TASKS[task]):]  # past cwe's one-shot example
    _, ruler_order = rendered(False)
    first = [own_context.index(f" {a}") for a in ordered]
    assert sorted(ordered) == sorted(ruler_order) and len(ordered) == (4 if task == "niah_multivalue" else 10)
    assert first == sorted(first) and ordered != ruler_order  # RULER's order is a shuffle the context hides
    # cycles 3-6 set the flag, but make_batch did not pass it on: the shipped stages say what was trained
    assert not any(s.ordered_sets for s in Recipe().stages)


def test_other_orders_are_distinct_and_never_the_given_one():
    from cachecraft_lib.tiny.samples import other_orders

    three = other_orders(["a", "b", "c"], 10, random.Random(0))
    assert len(three) == 5 and len(set(map(tuple, three))) == 5 and ["a", "b", "c"] not in three
    assert all(sorted(o) == ["a", "b", "c"] for o in three)
    ten = [str(i) for i in range(10)]
    assert len(other_orders(ten, 3, random.Random(0))) == 3 and other_orders(["x"], 3, random.Random(0)) == []
    rng = random.Random(5)
    other_orders(ten, 0, rng)  # asking for none draws nothing: the earlier stages' data stays the same
    assert rng.random() == random.Random(5).random()


def _answers_by_block(tokenizer, row) -> dict[int, str]:
    out: dict[int, list[int]] = {}
    for token, block, weight in zip(row.ids, row.blocks, row.weights, strict=True):
        if block > 0 and weight > 0:
            out.setdefault(block, []).append(token)
    return {b: tokenizer.decode(ids, skip_special_tokens=True) for b, ids in out.items()}


@pytest.mark.parametrize("task", ["fwe", "vt", "cwe", "niah_multivalue"])
def test_set_orders_ask_a_list_question_again_in_other_orders(task):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    stream = SampleStream(tokenizer, seed=1)
    row = stream.sample(task, 1024, random.Random(3), extra_questions=0, set_orders=3)
    answers = _answers_by_block(tokenizer, row)
    assert len(answers) == 4 and len(set(answers.values())) == 4  # RULER's order, then three others

    def items(text: str) -> list[str]:  # the listed items, without cwe's numbering, commas and "and"
        words = [w.strip(".,") for w in text.split()]
        return sorted(w for w in words if w and w != "and" and not (task == "cwe" and w.isdigit()))

    assert all(items(a) == items(answers[1]) for a in answers.values())
    questions = {b: [t for t, bb, w in zip(row.ids, row.blocks, row.weights, strict=True) if bb == b and w == 0]
                 for b in answers}
    assert all(q == questions[1] for q in questions.values())  # the same question each time
    plain = stream.sample(task, 1024, random.Random(3), extra_questions=0)
    assert max(plain.blocks) == 1 and plain.ids == row.ids[:len(plain.ids)]


def test_every_sample_of_a_batch_gets_the_stage_flags():
    """make_batch passes every stage flag on to each sample it draws (docs/journal/embedded_model_journal.md: one was lost)."""
    from transformers import AutoTokenizer

    from cachecraft_lib.tiny.batches import make_batch

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    stage = Stage(10, ("fwe",), (768,), set_orders=2, ordered_sets=True, unlikelihood=1.0)
    recipe = replace(Recipe(), steps=10, base_steps=10, stages=(stage,), batch_tokens=1024)
    batch = make_batch(SampleStream(tokenizer, recipe.seed), recipe, 0, tokenizer.pad_token_id)
    assert all(int(row.max()) == 3 for row in batch["blocks"])  # RULER's order and two others, in every row
    calls = []
    stream = SampleStream(tokenizer, recipe.seed)
    real = stream.sample
    stream.sample = lambda *a, **kw: calls.append(kw) or real(*a, **kw)
    make_batch(stream, recipe, 0, tokenizer.pad_token_id)
    assert calls and all(kw["ordered_sets"] and kw["set_orders"] == 2 and kw["repeats"] for kw in calls)


@pytest.mark.slow
def test_train_checkpoints_and_resumes(tmp_path):
    out = train(tmp_path, _recipe(2), tokenizer_dir=ASSET_TOKENIZER, save_every=1, threads=1)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["step"] == 2 and (out / "model.safetensors").exists() and (out / ".optim.pt").exists()
    assert state["device"] == "cpu"
    assert not list(out.glob("*.tmp"))
    with pytest.raises(ValueError, match="another recipe"):
        train(tmp_path, _recipe(3), save_every=1, threads=1)  # a changed recipe is refused, not mixed in
    from cachecraft_lib.tiny.recipe import load_recipe
    assert load_recipe(out / "trainer_state.json") == _recipe(2)  # the run's own recipe, to resume it by
    log = (out / "train_log.csv").read_text().splitlines()
    assert log[0].startswith("step,loss") and [r.split(",")[0] for r in log[1:]] == ["1", "2"]
    done = _recipe(2)  # a cycle appended after the steps done is the same past: it resumes
    longer = replace(done, steps=4, refine_ends=(*done.refine_ends, 2),
                     stages=(*done.stages, replace(done.stages[-1], until=4, weights=(1.0,) * 13)))
    train(tmp_path, longer, save_every=1, threads=1)
    assert json.loads((out / "trainer_state.json").read_text())["step"] == 4


def test_a_recipe_extends_another_only_if_every_step_done_is_the_same():
    done = Recipe().scaled(40)
    stages = (*done.stages[:-1], replace(done.stages[-1], until=50))
    longer = replace(done, steps=60, refine_ends=(*done.refine_ends, 40), stages=(*stages, replace(stages[-1], until=60)))
    assert extends(longer, done, 40) and recipe_from_json(recipe_json(longer)) == longer
    assert not extends(replace(longer, refine_ends=done.refine_ends), done, 40)  # its cooldown would move
    assert not extends(replace(longer, refine_lr=1e-4), done, 40)
    assert not extends(replace(longer, hidden_size=128), done, 40)
    assert not extends(replace(longer, stages=(replace(longer.stages[0], lengths=(256,)), *longer.stages[1:])), done, 40)
    assert not extends(replace(done, steps=30), done, 40)
    assert not resumable(longer, {"step": 40, "recipe": {**recipe_json(done), "future_field": 1}})


@pytest.mark.slow
def test_interrupted_training_resumes_from_its_checkpoint(tmp_path):
    train(tmp_path, _recipe(3), tokenizer_dir=ASSET_TOKENIZER, save_every=10, threads=1, max_minutes=0)
    assert json.loads((tmp_path / "trainer_state.json").read_text())["step"] == 1  # stopped at a checkpoint
    train(tmp_path, _recipe(3), save_every=10, threads=1)
    assert json.loads((tmp_path / "trainer_state.json").read_text())["step"] == 3
    steps = [r.split(",")[0] for r in (tmp_path / "train_log.csv").read_text().splitlines()[1:]]
    assert steps == ["1", "2", "3"]


def test_block_mask_lets_a_question_see_the_context_and_itself_only():
    import torch

    from cachecraft_lib.tiny.batches import block_causal_mask

    blocks = torch.tensor([[0, 0, 1, 1, 2, -1]])
    allowed = (block_causal_mask(blocks) == 0)[0, 0].int().tolist()
    assert allowed == [[1, 0, 0, 0, 0, 0],
                       [1, 1, 0, 0, 0, 0],
                       [1, 1, 1, 0, 0, 0],   # the first question: context and itself, causally
                       [1, 1, 1, 1, 0, 0],
                       [1, 1, 0, 0, 1, 0],   # the second question never sees the first
                       [1, 1, 0, 0, 0, 1]]   # padding (no loss) sees the context and itself, never a question


def test_worker_processes_build_exactly_the_batches_of_one_process():
    import torch
    from transformers import AutoTokenizer

    from cachecraft_lib.tiny.batches import make_batch, step_batches

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    recipe = _recipe(6)
    stream = SampleStream(tokenizer, recipe.seed)
    expected = [make_batch(stream, recipe, s, tokenizer.pad_token_id) for s in range(2, 6)]
    for workers in (0, 2):
        got = list(step_batches(tokenizer, recipe, first=2, workers=workers))
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g.keys() == e.keys() and all(torch.equal(g[k], e[k]) for k in e)


@pytest.mark.slow
def test_the_trained_weights_do_not_depend_on_the_data_workers(tmp_path):
    from safetensors.torch import load_file

    runs = [train(tmp_path / f"w{w}", _recipe(2), tokenizer_dir=ASSET_TOKENIZER, save_every=1, threads=1, workers=w)
            for w in (0, 1)]
    a, b = (load_file(run / "model.safetensors") for run in runs)
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_recipe_file_overrides_the_shipped_recipe_and_bad_files_say_why(tmp_path, capsys):
    from cachecraft_lib.cli import main
    from cachecraft_lib.tiny.recipe import load_recipe

    good = tmp_path / "gpu.json"
    good.write_text(json.dumps({"num_layers": 8, "batch_tokens": 32768}))
    recipe = load_recipe(good)
    assert (recipe.num_layers, recipe.batch_tokens) == (8, 32768)
    assert replace(recipe, num_layers=4, batch_tokens=4096) == Recipe()  # everything else is the shipped recipe
    assert main(["train-tiny", "--recipe", str(good), "--steps", "100", "--print-recipe"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["num_layers"] == 8 and printed["steps"] == 100 and printed["stages"][-1]["until"] == 100

    bad = {"typo.json": ({"num_layer": 8}, "unknown field"),
           "broken.json": ("{not json", "expected|Expecting"),
           "list.json": ([1, 2], "JSON object"),
           "task.json": ({"stages": [{"until": Recipe().steps, "tasks": ["niah_single_9"], "lengths": [512]}]}, "unknown task"),
           "short.json": ({"stages": [{"until": 10, "tasks": ["vt"], "lengths": [512]}]}, "must reach steps"),
           "stage.json": ({"stages": [{"until": Recipe().steps, "tasks": ["vt"]}]}, "malformed"),
           "weights.json": ({"stages": [{"until": Recipe().steps, "tasks": ["vt", "cwe"], "lengths": [512], "weights": [1.0]}]},
                            "one weight per task"),
           "steps.json": ({"steps": 20000}, "use --steps")}
    for name, (content, message) in bad.items():
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        with pytest.raises(ValueError, match=message):
            load_recipe(path)
        assert main(["train-tiny", "--recipe", str(path), "--out", str(tmp_path / "never")]) == 2
        assert "error: recipe file" in capsys.readouterr().err and not (tmp_path / "never").exists()


def test_model_card_says_where_the_model_was_trained():
    from cachecraft_lib.tiny.card import trained_on

    assert trained_on({"device": "cuda (NVIDIA H200)", "threads": 16}) == "cuda (NVIDIA H200)"
    assert trained_on({"device": "cpu", "threads": 2}) == "2 CPU thread(s)"
    assert trained_on({"threads": 2}) == "2 CPU thread(s)"  # states written before the device was recorded


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message for a machine without CUDA")
def test_asking_for_a_gpu_without_one_says_so_before_anything_is_written(tmp_path, capsys):
    from cachecraft_lib.cli import main

    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        train(tmp_path / "a", _recipe(2), tokenizer_dir=ASSET_TOKENIZER, device="cuda")
    assert main(["train-tiny", "--out", str(tmp_path / "b"), "--device", "cuda", "--fresh"]) == 2
    assert "--device cpu" in capsys.readouterr().err and not list(tmp_path.iterdir())  # no folder made


def test_a_recipe_over_the_size_budget_is_flagged(tmp_path):
    big = replace(_recipe(1), hidden_size=512, intermediate_size=4096, num_layers=2, num_heads=8, num_kv_heads=4)
    with pytest.warns(UserWarning, match="over the 20 MB budget"):
        train(tmp_path, big, tokenizer_dir=ASSET_TOKENIZER, threads=1)


def test_the_fifth_and_sixth_cycles_continue_the_step_10800_run():
    """The shipped weights (step 12,200) were trained on top of the step-10,800 model of earlier sessions:
    the recipe must still train every one of those 10,800 steps exactly as before, and each added cycle
    must weight what it was for (lists; then the 2048-token misses) and anneal to 0 at its end."""
    from cachecraft_lib.ruler.templates import TASKS

    now = Recipe()
    before = replace(now, steps=10800, refine_ends=(7400, 9200, 10000), stages=now.stages[:-2])
    assert extends(now, before, 10800) and now.steps == 12200 and now.refine_ends[-2:] == (10800, 11600)
    fifth, sixth = (dict(zip(TASKS, st.weights, strict=True)) for st in now.stages[-2:])
    assert max(fifth, key=fifth.get) in {"niah_multivalue", "niah_multiquery"} and min(now.stages[-2].lengths) == 512
    assert max(sixth, key=sixth.get) == "niah_multikey_3" and min(now.stages[-1].lengths) == 1024
    assert not any(st.set_orders for st in now.stages)  # tried on top of them (README), not shipped
    for end in (10800, 11600, 12200):  # each cycle cools to ~0 at its end, the next re-warms
        assert 0 < lr_at(now, end - 1) < 0.01 * now.refine_lr
    assert lr_at(now, 11600 + now.refine_warmup) == pytest.approx(now.refine_lr)


@pytest.mark.parametrize("task", ["niah_multivalue", "vt", "cwe", "fwe"])
def test_repeat_tokens_name_the_token_where_writing_an_earlier_item_again_would_start(task):
    from transformers import AutoTokenizer

    from cachecraft_lib.tiny.render import answer_text
    from cachecraft_lib.tiny.samples import repeat_tokens

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    text, items = GENERATORS[task].build(60, random.Random(4), TaskState(1024, 9))
    answer = answer_text(task, items)
    ids = tokenizer.encode(answer, add_special_tokens=False)
    avoid = repeat_tokens(tokenizer, answer, items)
    assert avoid and all(ids[i] not in toks for i, toks in avoid.items())  # the true token is never avoided
    for j in range(1, len(items)):  # write item j as a copy of item 0: it leaves the truth at an avoided token
        copy = tokenizer.encode(answer_text(task, items[:j] + [items[0]] + items[j + 1:]), add_special_tokens=False)
        d = next(i for i, (a, b) in enumerate(zip(ids, copy, strict=False)) if a != b)
        assert copy[d] in avoid[d]
    assert repeat_tokens(tokenizer, answer_text(task, items[:1]), items[:1]) == {}


def test_rows_mark_repeats_inside_list_answers_only_and_keep_the_same_tokens():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    stream = SampleStream(tokenizer, seed=1)
    for task, lists in (("cwe", True), ("niah_multivalue", True), ("niah_single_1", False)):
        plain = stream.sample(task, 1024, random.Random(5))
        marked = stream.sample(task, 1024, random.Random(5), repeats=True)
        assert marked.ids == plain.ids and plain.avoid == {}  # the data do not change, only what is avoided
        assert bool(marked.avoid) == lists
        assert all(marked.weights[i] == 1.0 and marked.ids[i] not in toks for i, toks in marked.avoid.items())


def test_repeat_loss_is_the_unlikelihood_of_the_avoided_tokens_and_pushes_them_down():
    import torch

    from cachecraft_lib.tiny.losses import repeat_loss

    logits = torch.tensor([[[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]], requires_grad=True)
    avoid = torch.tensor([[[0, 2], [-1, -1]]])
    p = logits.detach()[0, 0].softmax(-1)
    expected = -torch.log(1 - p[0]) - torch.log(1 - p[2])
    loss = repeat_loss(logits, avoid)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    assert logits.grad[0, 1].abs().sum() == 0  # nothing to avoid there: untouched
    stepped = (logits - 0.5 * logits.grad).detach()[0, 0].softmax(-1)
    assert stepped[0] + stepped[2] < p[0] + p[2]  # a gradient step moves mass off the avoided tokens
    assert repeat_loss(logits, torch.full((1, 2, 1), -1)).item() == 0.0


def test_an_unlikelihood_stage_adds_the_loss_to_its_batches():
    import torch
    from transformers import AutoTokenizer

    from cachecraft_lib.tiny.batches import make_batch
    from cachecraft_lib.tiny.losses import weighted_loss
    from cachecraft_lib.tiny.train import build_model

    tokenizer = AutoTokenizer.from_pretrained(ASSET_TOKENIZER)
    recipe = replace(_recipe(10), stages=(Stage(10, ("cwe", "fwe"), (768,), unlikelihood=2.0),))
    batch = make_batch(SampleStream(tokenizer, recipe.seed), recipe, 0, tokenizer.pad_token_id)
    assert (batch["avoid"][..., 0] >= 0).sum() > 0 and batch["unlikelihood"].item() == 2.0
    plain = {k: v for k, v in batch.items() if k not in ("avoid", "unlikelihood")}
    model = build_model(recipe, tokenizer)
    with torch.no_grad():
        assert weighted_loss(model, batch)[0] > weighted_loss(model, plain)[0]
    off = replace(recipe, stages=(replace(recipe.stages[0], unlikelihood=0.0),))
    assert "avoid" not in make_batch(SampleStream(tokenizer, recipe.seed), off, 0, tokenizer.pad_token_id)
