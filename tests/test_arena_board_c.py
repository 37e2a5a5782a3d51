"""Board C (decode-time eviction): submissions' decode hook under the harness's cap, bad hooks rejected with
their reason, board C end to end on the smoke profile, the board data, the G term, MATH-500's loader and
"not measurable" path, and the math-answer checker."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from cachecraft_lib.arena.boards.boards import BoardError, load_board, load_boards
from cachecraft_lib.arena.boards.math_answers import grade, last_boxed, normalise
from cachecraft_lib.arena.decode import submission_cap_method
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.decoding.capped import CappedGenerator

ASSETS = Path(__file__).parent / "assets" / "arena_c"
CAP = 96


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 400, (1, n), generator=torch.Generator().manual_seed(seed))


def _watched(model):
    """Cache lengths read from the cache tensors by an independent hook at every attention forward."""
    seen: list[tuple[int, int]] = []

    def hook(module, args, kwargs, output):
        layer = kwargs["past_key_values"].layers[module.layer_idx]
        seen.append((layer.keys.shape[2], layer.values.shape[2]))

    return seen, [la.self_attn.register_forward_hook(hook, with_kwargs=True) for la in model.model.layers]


# ------------------------------------------------------------------------------ the decode hook under the cap
@pytest.mark.parametrize("folder", ["good_decode", "good_decode_keep"])
def test_a_sandboxed_decode_hook_never_exceeds_the_cap(tiny_model, folder):
    model, _ = tiny_model
    seen, hooks = _watched(model)
    try:
        gen = CappedGenerator(model, submission_cap_method(load_submission(ASSETS / folder)), cap=CAP, chunk=40)
        gen.feed(_ids(160))
        gen.generate(_ids(8, 1), max_new_tokens=8, stop=set())
    finally:
        for h in hooks:
            h.remove()
    assert len(seen) >= 4 * 12  # context pieces, question and decode steps, every layer
    assert max(k for k, _ in seen) == CAP and all(k <= CAP and v <= CAP for k, v in seen)
    positions = gen.records[0].positions[0]
    assert positions.shape[-1] == CAP and bool((positions[:, 1:] > positions[:, :-1]).all())  # time order kept
    if folder == "good_decode_keep":  # StreamingLLM as indices: 4 sinks, then the newest
        assert positions[0, :4].tolist() == [0, 1, 2, 3] and int(positions[0, -1]) == gen.position - 1


def test_the_decode_hook_sees_the_layer_the_interface_promises(tiny_model):
    """Keys/values/queries/positions of one overflow, as the method receives them (checked outside it)."""
    from cachecraft_lib.arena.decode import layer_arrays

    model, _ = tiny_model
    captured = {}
    method = submission_cap_method(load_submission(ASSETS / "good_decode_keep"))
    inner = method.select

    def spy(module, keys, values, record, n_keep):
        captured.setdefault("arrays", layer_arrays(module, keys, values, record, 0))
        captured.setdefault("n_keep", n_keep)
        return inner(module, keys, values, record, n_keep)

    method.select = spy
    CappedGenerator(model, method, cap=64, chunk=32).feed(_ids(100))
    a, cfg = captured["arrays"], model.config
    kv, hd = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    assert a["keys"].shape == a["values"].shape == (kv, 64, hd)
    assert a["queries"].shape == (cfg.num_attention_heads, 8, hd) and a["positions"].shape == (kv, 64)
    assert captured["n_keep"] == 64 - 32


@pytest.mark.parametrize(("folder", "kind", "limits"), [
    ("over_cap", "over_budget", {}),
    ("duplicates_decode", "duplicate_indices", {}),
    ("crash_decode", "crash", {}),
    ("hang_decode", "timeout", {"timeout_s": 1.0}),
])
def test_a_bad_decode_hook_is_rejected_with_its_reason(tiny_model, folder, kind, limits):
    model, _ = tiny_model
    gen = CappedGenerator(model, submission_cap_method(load_submission(ASSETS / folder), **limits), cap=64, chunk=32)
    with pytest.raises(SubmissionError) as err:
        gen.feed(_ids(100))
    assert err.value.kind == kind and "decode" in str(err.value)
    assert all(la.keys.shape[2] <= 64 for la in gen.cache.layers)  # nothing the method returned was applied


def test_a_board_c_submission_must_define_decode(tmp_path):
    with pytest.raises(SubmissionError, match="must define decode") as err:
        load_submission(ASSETS / "prefill_only_on_c")
    assert err.value.kind == "bad_method"
    sub = load_submission(ASSETS / "good_decode")
    assert sub.decode and sub.returns == "none"
    folder = tmp_path / "decode_on_a"  # decode only, but declaring a prefill board
    folder.mkdir()
    for name in ("method.py", "DESCRIPTION.md"):
        (folder / name).write_text((ASSETS / "good_decode" / name).read_text())
    (folder / "metadata.yaml").write_text("name: x\nauthor: y\nboards: [A, C]\n")
    with pytest.raises(SubmissionError, match="score\\(layer\\) or keep\\(layer\\)"):
        load_submission(folder)


# ------------------------------------------------------------------------------------------- board data
def test_board_c_data_per_profile():
    smoke, paper = load_board("smoke", "C"), load_board("paper", "C")
    for b in (smoke, paper):
        assert b.decode_time and set(b.baselines) == {"no_press", "tova", "h2o", "rkv", "streaming_llm", "random"}
        assert b.weights["generated_length"] > 0
    assert all(0 < x < 1 for x in smoke.budgets) and smoke.benchmark == "ruler"
    assert paper.budgets == (2048.0, 4096.0) and paper.benchmark == "math500" and paper.max_new_tokens == 16384
    assert paper.model == "Qwen/Qwen3-8B" and paper.cap_for(2048, 90) == 2048 and smoke.cap_for(0.5, 900) == 450
    assert load_board("smoke", "A").weights["generated_length"] == 0  # prefill boards do not charge G


def test_bad_board_c_data_is_named(tmp_path):
    good = ("profile: smoke\ndefaults: {lengths: [512], tasks: [qa_1], limits: {mode: relative, accuracy: 0.8, "
            "efficiency: 0.8}}\nboards:\n  C: {setting: decode_time, budgets: [0.5], items: {dev: 1, test: 1}, "
            "baselines: [h2o, no_press], weights: {accuracy: 1, memory: 0, speed: 0, overhead: 0, generated_length: 0.1}}\n")
    path = tmp_path / "b.yaml"
    for edit, message in [(("[0.5]", "[1.5]"), "decode-time budgets"), (("[h2o, no_press]", "[snapkv, no_press]"),
                                                                          "unknown baseline"),
                          (("decode_time,", "decode_time, benchmark: gsm8k,"), "benchmark must be")]:
        path.write_text(good.replace(*edit))
        with pytest.raises(BoardError, match=message):
            load_boards("smoke", path)
    path.write_text(good.replace("decode_time", "query_aware").replace("[h2o, no_press]", "[snapkv, no_press]"))
    with pytest.raises(BoardError, match="generated_length weight is for decode-time"):
        load_boards("smoke", path)
    path.write_text(good)
    assert load_boards("smoke", path)["C"].budgets == (0.5,)


def test_generated_length_term_by_hand():
    from cachecraft_lib.arena.scoring import score

    board = replace(load_board("smoke", "C"), weights={"accuracy": 1.0, "memory": 0.0, "speed": 0.0,
                                                       "overhead": 0.0, "generated_length": 0.5})
    base = {"task": "qa_1", "length": 512, "context_id": "c", "logical_entries": 50, "physical_entries": 50,
            "full_entries": 100, "read_entries": 50, "full_read_entries": 100, "overhead_flops": 0,
            "prefill_flops": 10, "score": 100.0}
    rows = pd.DataFrame([{**base, "method": "no_press", "budget": 1.0, "item": "c/0", "generated_tokens": 10},
                         {**base, "method": "m", "budget": 0.5, "item": "c/0", "generated_tokens": 40}])
    u = score.unit_values(rows, board).set_index("method")
    assert u.loc["m", "generated"] == pytest.approx(0.75)  # G = 10 / 40
    assert u.loc["m", "overall"] == pytest.approx(1.0 - 0.5 * 0.75) and u.loc["no_press", "generated"] == 0


# ---------------------------------------------------------------------------------- smoke board end to end
def _small_arena(tmp_path, monkeypatch):
    from cachecraft_lib.arena.arena import Arena

    monkeypatch.setenv("CACHECRAFT_ARENA_SECRET", "5d0b7e9a3c18f4e26a9d0c7b81e5f3a4e2c94a7f0d6b3815")
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    arena.boards["C"] = replace(arena.boards["C"], lengths=(512,), tasks=("niah_single_1",),
                                baselines=("streaming_llm", "no_press"), questions_per_context=1, budgets=(0.5,),
                                items={"dev": 1, "test": 1})
    return arena


def test_board_c_on_smoke_end_to_end(tmp_path, monkeypatch):
    """dev + submit + a leaderboard row on the embedded model; a bad decode hook is a recorded rejection."""
    from cachecraft_lib.arena.board_runner import submission_contender
    from cachecraft_lib.arena.boards.splits import load_secret
    from cachecraft_lib.arena.scoring import leaderboard

    arena = _small_arena(tmp_path, monkeypatch)
    sub = load_submission(ASSETS / "good_decode_keep")
    dev = arena.dev("C", submission_contender(sub))
    scores = dev["scores"]
    assert {"no_press", "streaming_llm", "good-decode-keep"} <= set(scores.index)
    # the submission IS StreamingLLM written as indices: the same answers, memory, reads and length; its
    # overhead also counts the window queries the harness computes for it
    for term in ("accuracy", "memory", "speed", "generated"):
        assert scores.loc["good-decode-keep", term] == pytest.approx(scores.loc["streaming_llm", term])
    assert scores.loc["good-decode-keep", "overhead"] >= scores.loc["streaming_llm", "overhead"]
    assert 0.3 < scores.loc["streaming_llm", "memory"] < 0.7  # the cap is half the context
    rows = arena.dev_baselines(arena.boards["C"])  # cached by dev()
    capped = rows[rows.method != "no_press"]
    assert (capped.max_cache <= capped.cap).all() and (capped.max_cache == capped.cap).all()
    entry = arena.submit(ASSETS / "good_decode_keep", "C", load_secret())
    assert not entry.get("rejected") and "generated" in entry and entry["gain_lo"] <= entry["gain"] <= entry["gain_hi"]
    before = (arena.root / "ledger.jsonl").read_text()
    bad = arena.submit(ASSETS / "over_cap", "C", load_secret())
    assert bad["rejected"] and bad["kind"] == "over_budget"
    events = arena.ledger.events()
    assert events[-1]["kind"] == "rejection" and (arena.root / "ledger.jsonl").read_text().startswith(before)
    table = leaderboard.leaderboard(events, "C")
    assert {"good-decode-keep", "streaming_llm", "no_press"} <= set(table.name)


def test_board_c_refuses_a_prefill_only_submission(tmp_path, monkeypatch):
    from cachecraft_lib.arena.boards.splits import load_secret

    arena = _small_arena(tmp_path, monkeypatch)
    out = arena.submit(Path(__file__).parent / "assets" / "arena" / "good_scores", "C", load_secret())
    assert out["rejected"] and out["kind"] == "bad_metadata"  # it names board A only


# ------------------------------------------------------------------------------------ MATH-500 (paper)
def _problems(n: int = 500) -> pd.DataFrame:
    return pd.DataFrame({"problem": [f"p{i}" for i in range(n)], "answer": [str(i) for i in range(n)],
                         "unique_id": [f"u{i}" for i in range(n)]})


def test_math500_splits_are_disjoint_and_secret():
    from cachecraft_lib.arena.boards.math500 import as_items, select_problems

    board = load_board("paper", "C")
    dev = select_problems(_problems(), board, "dev")
    test = select_problems(_problems(), board, "test", b"s" * 32)
    other = select_problems(_problems(), board, "test", b"t" * 32)
    assert len(dev) == 20 and len(test) == 80 and not set(dev.unique_id) & set(test.unique_id)
    assert set(test.unique_id) != set(other.unique_id)  # another secret, other problems
    assert dev.equals(select_problems(_problems(), board, "dev"))  # dev is public and fixed
    with pytest.raises(Exception, match="secret"):
        select_problems(_problems(), board, "test", None)
    items = as_items(dev.head(2), board)
    assert items.max_new_tokens.eq(16384).all() and items.context.str.contains("boxed").all()


def test_paper_board_c_is_not_measurable_offline(monkeypatch, capsys):
    """Without the hub: a clear status from the library and the CLI (exit 0), before any model is loaded."""
    from cachecraft_lib.arena import arena as harness
    from cachecraft_lib.arena.boards import math500
    from cachecraft_lib.cli import main
    from cachecraft_lib.ruler import dataset

    monkeypatch.setattr(dataset, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setattr(harness.Arena, "model", lambda self, board=None: pytest.fail("no model may load"))
    with pytest.raises(math500.NotMeasurable, match="not measurable here"):
        harness.Arena("paper").items(load_board("paper", "C"), "dev")
    assert main(["arena", "dev", "baseline:tova", "--board", "C", "--profile", "paper", "--root", "/tmp/x-none"]) == 0
    assert "not measurable here" in capsys.readouterr().out


# -------------------------------------------------------------------------------------- math checker
def test_nested_braces_in_boxed_answers():
    text = r"so the answer is $\boxed{\frac{1}{2}}$, not \boxed{3}... finally \boxed{\frac{\sqrt{3}}{2}}."
    assert last_boxed(text) == r"\frac{\sqrt{3}}{2}"
    assert text.split("boxed{")[-1].split("}")[0] == r"\frac{\sqrt{3"  # what KVPress's split keeps
    assert last_boxed(r"\boxed 5 apples") == "5" and last_boxed("no box") is None
    assert last_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"


@pytest.mark.parametrize(("response", "reference", "ok"), [
    (r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}", True),
    (r"\boxed{0.5}", r"\frac12", True),
    (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)", True),
    (r"\boxed{90^\circ}", "90", True),
    (r"\boxed{\frac{1}{3}}", r"\frac{1}{2}", False),
    ("the answer is 4", "4", False),  # pass@1 needs the boxed answer
])
def test_grade(response, reference, ok):
    assert grade(response, reference) is ok


def test_grade_without_math_verify_falls_back_to_normalised_strings(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_math_verify(name, *args, **kwargs):
        if name.startswith("math_verify"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_math_verify)
    assert grade(r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}") and not grade(r"\boxed{0.5}", r"\frac{1}{2}")
    assert normalise(r"\left(1, 2\right).") == "(1,2)" and json.dumps(normalise(" 7.00 ")) == '"7"'


def test_board_c_refuses_contenders_without_a_decode_time_method(tiny_model):
    from cachecraft_lib.arena.board_c import DecodeBoardRunner
    from cachecraft_lib.arena.board_runner import baseline_contender, submission_contender

    runner = DecodeBoardRunner(*tiny_model, load_board("smoke", "C"))
    with pytest.raises(BoardError, match="no decode-time method"):
        runner.run(pd.DataFrame(), [baseline_contender("snapkv")])
    prefill_only = load_submission(Path(__file__).parent / "assets" / "arena" / "good_scores")
    with pytest.raises(SubmissionError, match="must define decode"):
        runner.run(pd.DataFrame(), [submission_contender(prefill_only)])
    assert baseline_contender("h2o").decode is not None  # decode-time only ...
    with pytest.raises(ValueError, match="decode-time method only"):
        baseline_contender("h2o").build(0.5)  # ... it has no prefill press
