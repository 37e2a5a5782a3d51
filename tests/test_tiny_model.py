"""The shipped embedded model: KVPress-exact rendering, and no regression against its model card."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cachecraft_lib.models.loading import load_model, resolve
from cachecraft_lib.ruler import generate
from cachecraft_lib.tiny.measure import smoke_scores
from cachecraft_lib.tiny.render import answer_text, render_ids

QUALITY = resolve("tiny") + "/quality.json"


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def test_rendering_matches_kvpress_pipeline(tiny):
    from kvpress import KVPressTextGenerationPipeline

    model, tok = tiny
    pipe = KVPressTextGenerationPipeline(model=model, tokenizer=tok, device="cpu")
    df = generate(1024, tok, samples_per_task=1, tasks=["niah_single_1", "vt"])
    for row in df.itertuples():
        ctx, q, a = render_ids(tok, row.context, row.question, row.answer_prefix, answer_text(row.task, row.answer))
        pre = pipe.preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**6)
        assert pre["context_ids"][0].tolist() == ctx
        assert pre["questions_ids"][0][0].tolist() == q
        assert a[-1] == tok.eos_token_id


def test_answer_text_scores_full_marks():
    from cachecraft_lib.ruler import score

    rows = [("niah_multivalue", ["1", "2", "3", "4"]), ("vt", ["AAAAA", "BBBBB"]), ("cwe", ["x", "y"]),
            ("fwe", ["abc", "def", "ghi"]), ("qa_1", ["Paris"])]
    df = pd.DataFrame({"task": [t for t, _ in rows], "answer": [a for _, a in rows],
                       "predicted_answer": [answer_text(t, a) for t, a in rows]})
    assert score(df)["aggregate"] == 100.0


@pytest.mark.slow
def test_shipped_weights_match_their_model_card(tiny):
    try:
        stored = json.loads(open(QUALITY).read())["smoke_check"]["scores"]
    except FileNotFoundError:
        pytest.fail(f"{QUALITY} is missing: run `cachecraft tiny-card` after training")
    model, tok = tiny
    now = smoke_scores(model, tok)
    assert set(now) == set(stored)
    assert now["aggregate"] >= stored["aggregate"] - 5, (now, stored)
    for task in stored:
        assert now[task] >= stored[task] - 50, (task, now, stored)  # at most one of two samples may flip


def test_rebuilt_card_keeps_the_earlier_measurement_as_history(tmp_path):
    from cachecraft_lib.tiny.card import write_card
    from cachecraft_lib.tiny.recipe import Recipe, recipe_json

    state = {"step": 7400, "elapsed_s": 3600, "parameters": 10, "recipe": recipe_json(Recipe()), "torch": "x"}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    old = {"step": 5000, "seed": 1, "samples_per_task": 5, "scores": {"1024/no_press/0.0": {"aggregate": 41.7}}}
    (tmp_path / "quality.json").write_text(json.dumps(old))
    results = {"seed": 1, "samples_per_task": 5, "scores": {"1024/no_press/0.0": {"niah_single_1": 100.0, "aggregate": 50.0}}}
    card = write_card(tmp_path, results, {"aggregate": 50.0}, 1.0).read_text()
    history = json.loads((tmp_path / "quality.json").read_text())["history"]
    assert history == [{"step": 5000, "seed": 1, "samples_per_task": 5, "aggregate": {"1024/no_press/0.0": 41.7}}]
    assert "## Aggregate over training" in card and "step 5000" in card and "refine cycle" in card
    write_card(tmp_path, results, {"aggregate": 50.0}, 1.0)  # same step again: no duplicate entry
    assert len(json.loads((tmp_path / "quality.json").read_text())["history"]) == 1


def test_shipped_weights_are_the_current_recipe_finished():
    """A fresh clone's `train-tiny` must find the shipped run complete under the recipe in the code, not
    refuse it as another recipe's (which would happen if the recipe changed without retraining)."""
    from cachecraft_lib.tiny.recipe import Recipe, resumable

    state = json.loads((Path(resolve("tiny")) / "trainer_state.json").read_text())
    assert resumable(Recipe(), state) and state["step"] == Recipe().steps


def test_card_says_how_the_model_fails(tmp_path):
    from cachecraft_lib.tiny.card import write_card
    from cachecraft_lib.tiny.measure import failures, repeated_item
    from cachecraft_lib.tiny.recipe import Recipe, recipe_json

    df = pd.DataFrame({
        "task": ["cwe", "cwe", "vt", "qa_1", "niah_single_1"],
        "answer": [["glacier", "violin", "crane"], ["a1", "b1"], ["XWAQM", "CRPKL"], ["Paris"], ["42"]],
        "predicted_answer": [" 1. glacier 2. glacier 3. glacier", "a1 b1", "XWAQM OHEL", "Rome", " 42\n"]})
    found = failures(df)
    assert set(found) == {"cwe", "vt", "qa_1"}  # the correct cwe row and the niah row are not misses
    assert found["cwe"] == {"missed": 1, "of": 2, "repeating": 1,
                            "example": {"expected": ["glacier", "violin", "crane"],
                                        "predicted": "1. glacier 2. glacier 3. glacier"}}
    assert found["vt"]["repeating"] == 0 and repeated_item("XWAQM XWAQM XWAQM") == "XWAQM"
    assert repeated_item("7302474, 4658597, 7302474, and 4658597.") in {"7302474", "4658597"}
    assert repeated_item("1. dwarf 2. name 3. nap") is None  # list numbering is not an item

    state = {"step": 1, "elapsed_s": 1, "parameters": 10, "recipe": recipe_json(Recipe()), "torch": "x"}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    results = {"seed": 1, "samples_per_task": 2, "scores": {"1024/no_press/0.0": {"niah_single_1": 100.0, "cwe": 50.0, "aggregate": 75.0}},
               "failures": {"1024": found},
               "no_repeats": [{"length": 1024, "task": "fwe", "samples": 2, "greedy": 33.33, "no_repeats": 66.67},
                              {"length": 1024, "task": "vt", "samples": 2, "greedy": 20.0, "no_repeats": 20.0}]}
    card = write_card(tmp_path, results, {"aggregate": 50.0}, 1.0).read_text()
    assert "## How it fails" in card and "| cwe | 1/2 (1) |" in card
    assert "## If it could not repeat itself" in card and "| 1024 greedy | 1024 no repeats |" in card
    assert "| fwe | 33.3 | 66.7 |" in card and "| vt | 20.0 | 20.0 |" in card
    assert "- qa_1: expected `Paris`, predicted `Rome`" in card


@pytest.mark.slow
def test_card_rechecks_the_model_on_a_held_out_seed(tiny, tmp_path):
    from cachecraft_lib.tiny.card import write_card
    from cachecraft_lib.tiny.measure import EVAL_SEED, HELDOUT_SEED, heldout_scores
    from cachecraft_lib.tiny.recipe import Recipe, recipe_json

    model, tok = tiny
    held = heldout_scores(model, tok, (1024,), 2, tasks=("niah_single_1", "vt"), progress=False)
    assert HELDOUT_SEED != EVAL_SEED and held["seed"] == HELDOUT_SEED and held["samples_per_task"] == 2
    assert set(held["scores"]["1024"]) == {"niah_single_1", "vt", "aggregate"}
    assert held["scores"]["1024"]["niah_single_1"] == 100.0  # the shipped model finds single needles

    state = {"step": 2, "elapsed_s": 1, "parameters": 10, "recipe": recipe_json(Recipe()), "torch": "x"}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    old = {"step": 1, "seed": 1, "samples_per_task": 2, "scores": {"1024/no_press/0.0": {"aggregate": 40.0}},
           "heldout": {"seed": HELDOUT_SEED, "samples_per_task": 2, "scores": {"1024": {"aggregate": 35.0}}}}
    (tmp_path / "quality.json").write_text(json.dumps(old))
    results = {"seed": 1, "samples_per_task": 2, "scores": {"1024/no_press/0.0": {"niah_single_1": 100.0, "aggregate": 50.0}}}
    card = write_card(tmp_path, results, {"aggregate": 50.0}, 1.0, held).read_text()
    quality = json.loads((tmp_path / "quality.json").read_text())
    assert quality["heldout"] == held and quality["history"][0]["heldout_aggregate"] == {"1024": 35.0}
    assert f"## Held-out check (seed {HELDOUT_SEED}, 2 samples per task" in card
    now = held["scores"]["1024"]["aggregate"]
    verdict = "met" if now >= 80 else "NOT met"  # the worst NIAH task here is niah_single_1 at 100
    assert f"- 1024 tokens: aggregate {now:.1f}, worst NIAH 100.0 -> {verdict}" in card
    assert f"| held-out 1024 | 35.0 | {now:.1f} |" in card  # the history carries held-out aggregates too


def test_shipped_model_fits_its_size_budget():
    from cachecraft_lib.tiny.recipe import SHIPPED_BUDGET_MB

    folder = Path(resolve("tiny"))
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) / 1e6
    assert 1 < size < SHIPPED_BUDGET_MB, f"{folder} holds {size:.1f} MB (budget {SHIPPED_BUDGET_MB} MB)"


def test_card_tables_round_like_the_bar_lines():
    """A card table rounds an aggregate as the bar line below it does: 61.85 is 61.9 in both."""
    from cachecraft_lib.tiny.card import md_table

    assert "| 61.9 |" in md_table(pd.DataFrame({"aggregate": [61.85]}, index=["2048"])) and f"{61.85:.1f}" == "61.9"


@pytest.mark.slow
def test_compression_still_matters_on_the_shipped_weights(tiny):
    """The half of the bar the shipped weights meet: StreamingLLM at r = 0.88 keeps only the start and the end
    of the context, so needles in between are lost and it scores far below no compression (card: 6 vs 75)."""
    from cachecraft_lib.methods.registry import make_press
    from cachecraft_lib.ruler import score
    from cachecraft_lib.tiny.measure import EVAL_SEED, predict

    model, tok = tiny
    df = generate(1024, tok, samples_per_task=2, seed=EVAL_SEED, tasks=["niah_single_1", "niah_multikey_1"])
    full, stream = (score(df.assign(predicted_answer=predict(model, tok, df, make_press(name, ratio), progress=False)))
                    ["aggregate"] for name, ratio in (("no_press", 0.0), ("streaming_llm", 0.88)))
    assert full >= 75 and full - stream >= 50, (full, stream)


class _OneWordModel:
    """A stand-in causal LM that always ranks the same tokens first: word ``a``, then ``b``, then eos."""

    def __init__(self, order: list[int], vocab: int, eos: int) -> None:
        from types import SimpleNamespace

        import torch

        self.device = torch.device("cpu")
        self.generation_config = SimpleNamespace(eos_token_id=eos)
        self.logits = torch.zeros(vocab)
        for rank, token in enumerate(order):
            self.logits[token] = 10.0 - rank

    def __call__(self, input_ids, past_key_values=None, position_ids=None, logits_to_keep=0):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.logits.expand(1, input_ids.shape[1], -1))


def test_banning_repeats_makes_a_repeating_model_move_on_to_its_next_choice():
    import torch
    from kvpress import KVPressTextGenerationPipeline
    from transformers import AutoTokenizer

    from cachecraft_lib.models.pipeline import NoRepeatPipeline

    tok = AutoTokenizer.from_pretrained("tests/assets/tokenizer")
    first, second = (tok.encode(w, add_special_tokens=False)[0] for w in (" the", " and"))
    model = _OneWordModel([first, second, tok.eos_token_id], len(tok), tok.eos_token_id)

    def answer(cls: type) -> str:
        pipe = object.__new__(cls)  # generate_answer needs only the model and the tokenizer
        pipe.model, pipe.tokenizer = model, tok
        return pipe.generate_answer(torch.tensor([[5, 6]]), None, context_length=3, max_new_tokens=3)

    assert answer(KVPressTextGenerationPipeline).split() == ["the"] * 3  # what the tiny model does
    assert answer(NoRepeatPipeline).split() == ["the", "and"]  # then eos


@pytest.mark.slow
def test_the_shipped_model_knows_more_of_a_list_than_it_writes(tiny):
    """The card's diagnostic on cwe (2 samples at 1024): the shipped weights write one word ten times where
    decoding that may not repeat a word finds more of the list (measured 15 -> 35; card, 5 samples: 10 -> 36).
    Greedy here must equal the pipeline's answers, so the same samples score as in the card's table."""
    from cachecraft_lib.ruler import score
    from cachecraft_lib.tiny.diagnose import no_repeat_recall
    from cachecraft_lib.tiny.measure import EVAL_SEED, predict

    model, tok = tiny
    table = no_repeat_recall(model, tok, (1024,), 2, tasks=("cwe",))
    row = table.iloc[0]
    assert list(table.columns) == ["length", "task", "samples", "greedy", "no_repeats"] and row["samples"] == 2
    assert row["no_repeats"] >= row["greedy"] + 10, table
    df = generate(1024, tok, samples_per_task=2, seed=EVAL_SEED, tasks=["cwe"])
    assert score(df.assign(predicted_answer=predict(model, tok, df, progress=False)))["cwe"] == pytest.approx(row["greedy"])


def test_shipped_card_is_what_the_card_code_writes_from_its_measurements(tmp_path):
    """The card's prose and tables live in ``card.py``; the shipped README.md must be what that code writes
    from the shipped quality.json, so an edit to either cannot leave them telling different stories."""
    import shutil

    from cachecraft_lib.tiny.card import write_card

    folder = tmp_path / "model"
    shutil.copytree(resolve("tiny"), folder)
    quality = json.loads((folder / "quality.json").read_text())
    results = {k: quality[k] for k in ("seed", "samples_per_task", "scores", "failures", "no_repeats")}
    card = write_card(folder, results, quality["smoke_check"]["scores"], quality["measured_in_s"], quality["heldout"])
    assert card.read_text() == (Path(resolve("tiny")) / "README.md").read_text()
    assert json.loads((folder / "quality.json").read_text()) == quality
