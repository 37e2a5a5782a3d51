"""Arena boards, scoring, calibration, leaderboards and CLI errors (helper arena-boards' part of issue 22)."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace

import pandas as pd
import pytest

from cachecraft_lib.arena import calibration as calibrate
from cachecraft_lib.arena.boards.boards import BOARDS_DIR, BoardError, load_board, load_boards, write_budgets
from cachecraft_lib.arena.scoring import leaderboard, score
from cachecraft_lib.cli import main

# ----------------------------------------------------------------------------------------------- boards


@pytest.mark.parametrize("profile", ["paper", "cpu", "smoke"])
def test_boards_load_and_validate(profile):
    boards = load_boards(profile)
    assert {"A", "B_online", "B_offline"} <= set(boards)
    assert boards["A"].query_aware and not boards["B_online"].query_aware
    assert boards["B_offline"].overhead_allowance and boards["B_online"].overhead_allowance is None
    assert all("no_press" in b.baselines and b.questions_per_context >= 1 for b in boards.values())
    assert boards["A"].ratios == tuple(round(1 - k, 6) for k in boards["A"].budgets)


def test_paper_boards_are_the_posts():
    boards = load_boards("paper")
    assert boards["A"].budgets == (0.02, 0.05, 0.10) and boards["B_online"].budgets == (0.10, 0.25, 0.50)
    assert boards["A"].limits.mode == "absolute" and (boards["A"].limits.accuracy, boards["A"].limits.efficiency) == (0.6, 0.15)
    assert boards["A"].extra_benchmarks[0]["status_offline"] == "not measurable here"
    assert {"snapkv", "pyramidkv", "adasnapkv", "tova"} <= set(boards["A"].baselines)
    assert "kvzip" in boards["B_offline"].baselines and "kvzip" not in boards["B_online"].baselines


def _bad(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


GOOD = """profile: smoke
defaults: {lengths: [1024], tasks: [qa_1], limits: {mode: relative, accuracy: 0.8, efficiency: 0.8}}
boards:
  A: {setting: query_aware, budgets: [0.5], items: {dev: 1, test: 1}, baselines: [snapkv, no_press],
      weights: {accuracy: 1, memory: 0, speed: 0, overhead: 0}}
"""


@pytest.mark.parametrize("edit, message", [
    (("budgets: [0.5]", "budgets: [1.5]"), "budgets must be"),
    (("setting: query_aware", "setting: sideways"), "setting must be"),
    (("baselines: [snapkv, no_press]", "baselines: [snapkv, nope, no_press]"), "unknown baseline"),
    (("baselines: [snapkv, no_press]", "baselines: [snapkv]"), "must include 'no_press'"),
    (("overhead: 0}", "overhead: -1}"), "weights need"),
    (("items: {dev: 1, test: 1}", "items: {dev: 1}"), "items must"),
    (("budgets: [0.5], ", ""), "missing field 'budgets'"),
    (("boards:", "boards: [\n"), "not valid YAML"),
    (("budgets: [0.5],", "budgets: [0.5], colour: red,"), r"unknown field\(s\) \['colour'\]; the fields a board may"),
    (("mode: relative", "mode: sideways"), r"limits.mode must be one of \('absolute', 'relative'\), got 'sideways'"),
    (("{lengths: [1024]", "{lengths: 1024"), "lengths must be a list, got 1024"),
    (("dev: 1, test: 1", "dev: one, test: 1"), "items.dev must be an integer, got 'one'"),
    (("dev: 1, test: 1", "dev: true, test: 1"), "items.dev must be an integer, got True"),  # a bool is no count
    (("accuracy: 0.8, efficiency", "accuracy: '0.8', efficiency"), "limits.accuracy must be a number, got '0.8'"),
    (("budgets: [0.5]", "budgets: [0.5, [1]]"), r"budgets.1 must be a number, got \[1\]"),
])
def test_bad_board_data_is_named(tmp_path, edit, message):
    path = _bad(tmp_path, GOOD.replace(*edit))
    with pytest.raises(BoardError, match=message) as err:
        load_boards("smoke", path)
    assert "bad.yaml" in str(err.value)
    assert load_boards("smoke", _bad(tmp_path, GOOD))["A"].budgets == (0.5,)


def test_unknown_board_and_profile():
    with pytest.raises(BoardError, match="unknown board 'Z'.*A, B_online, B_offline"):
        load_board("smoke", "Z")
    with pytest.raises(BoardError, match="no board data for profile 'nope'"):
        load_boards("nope")


def test_write_budgets_round_trip_and_refuses_bad(tmp_path):
    path = tmp_path / "smoke.yaml"
    shutil.copy(BOARDS_DIR / "smoke.yaml", path)
    write_budgets("smoke", {"A": (0.8, 0.6)}, {"A": {"best_accuracy": {"0.8": 0.7}}}, path)
    board = load_board("smoke", "A", path)
    assert board.budgets == (0.8, 0.6) and board.calibration["best_accuracy"] == {"0.8": 0.7}
    assert path.read_text().startswith("# Boards of the `smoke` profile")
    before = path.read_text()
    with pytest.raises(BoardError):
        write_budgets("smoke", {"A": (1.5,)}, {}, path)
    assert path.read_text() == before  # a rejected calibration leaves the file as it was


def test_hub_dev_and_test_are_disjoint_by_construction(monkeypatch):
    """On the hub path (``paper`` profile) dev and test are drawn from one RULER pool; each row's split is fixed by
    its context (``items.hub_part``), so no seed, round or sample size puts a context in both."""
    from cachecraft_lib.arena.boards import items as board_items_mod

    board = load_boards("paper")["A"]
    rows = [{"task": t, "context": f"{t} haystack {i % 40}", "question": f"q{i}", "answer_prefix": "",
             "answer": [str(i)], "max_new_tokens": 8} for t in board.tasks for i in range(60)]  # 40 contexts per task
    pool = pd.DataFrame(rows)
    monkeypatch.setattr(board_items_mod.ruler_data, "load_hf", lambda length: pool.copy())
    secret = bytes(range(32))
    dev = board_items_mod.board_items(board, "dev", None, source="hf")
    assert set(dev.task) == set(board.tasks)
    for round_ in (1, 2, 3):
        test = board_items_mod.board_items(board, "test", None, secret=secret, round_=round_, source="hf")
        assert len(test) and not set(dev.context) & set(test.context), round_
    for split in ("dev", "test"):  # the halves partition the pool, and neither is empty
        assert {board_items_mod.hub_part(c) for c in (dev if split == "dev" else test).context} == {split}
    big = board_items_mod._hub_contexts(pool, 60, 7, board.tasks, "dev")  # more than a half asked for: still dev's
    assert set(big.context) and {board_items_mod.hub_part(c) for c in big.context} == {"dev"}


# ---------------------------------------------------------------------------------------------- scoring
def _rows(spec, full_entries=1000, prefill_flops=1000):
    """Hand-made evaluation rows: spec = [(method, budget, item, task, score, logical, physical, flops)]."""
    out = []
    for method, budget, item, task, s, logical, physical, flops in spec:
        out.append({"method": method, "budget": budget, "item": item, "context_id": item, "task": task, "length": 1,
                    "score": s, "predicted_answer": "", "logical_entries": logical, "physical_entries": physical,
                    "full_entries": full_entries, "kv_bytes": physical * 4, "full_kv_bytes": full_entries * 4,
                    "read_entries": physical + 10, "full_read_entries": full_entries + 10, "overhead_flops": flops,
                    "prefill_flops": prefill_flops})
    return pd.DataFrame(out)


def _board(**kw):
    board = load_board("smoke", "A")
    return replace(board, budgets=(0.5,), weights={"accuracy": 1.0, "memory": 0.5, "speed": 0.0, "overhead": 1.0},
                   **kw)


def test_normalisation_and_efficiency_by_hand():
    rows = _rows([
        ("no_press", 1.0, "a", "t1", 100, 1000, 1000, 0), ("no_press", 1.0, "b", "t1", 50, 1000, 1000, 0),
        ("no_press", 1.0, "c", "t2", 10, 1000, 1000, 0),  # t2: full below the floor of 25 -> excluded
        ("m", 0.5, "a", "t1", 100, 500, 500, 100), ("m", 0.5, "b", "t1", 0, 500, 500, 100),
        ("m", 0.5, "c", "t2", 100, 500, 500, 100),
        ("mask", 0.5, "a", "t1", 75, 500, 1000, 300), ("mask", 0.5, "b", "t1", 0, 500, 1000, 300),
        ("mask", 0.5, "c", "t2", 0, 500, 1000, 300),
    ])
    board = _board()
    units = score.unit_values(rows, board)
    assert units.attrs["excluded_tasks"] == ["t2"] and set(units.task) == {"t1"}
    table = score.method_scores(units)
    # accuracy = sum(m) / sum(full) on the same items: (100 + 0) / (100 + 50)
    assert table.loc["m", "accuracy"] == pytest.approx(100 / 150)
    assert table.loc["mask", "accuracy"] == pytest.approx(75 / 150)
    assert table.loc["m", "memory"] == pytest.approx(0.5) and table.loc["m", "memory_physical"] == pytest.approx(0.5)
    # a key-masking press: logical memory saved, physically nothing
    assert table.loc["mask", "memory"] == pytest.approx(0.5) and table.loc["mask", "memory_physical"] == 0
    assert table.loc["mask", "speed"] == 0 and table.loc["m", "speed"] == pytest.approx(1 - 510 / 1010)
    assert table.loc["m", "overhead"] == pytest.approx(0.1) and table.loc["mask", "overhead"] == pytest.approx(0.3)
    assert table.loc["m", "overall"] == pytest.approx(100 / 150 + 0.5 * 0.5 - 0.1)
    assert table.loc["no_press", "overall"] == pytest.approx(1.0)
    physical = score.method_scores(score.unit_values(rows, replace(board, memory_basis="physical")))
    assert physical.loc["mask", "memory"] == 0


def test_accuracy_cap_and_allowance():
    rows = _rows([("no_press", 1.0, "a", "t", 40, 1000, 1000, 0), ("no_press", 1.0, "b", "t", 40, 1000, 1000, 0),
                  ("m", 0.5, "a", "t", 100, 500, 500, 5000), ("m", 0.5, "b", "t", 100, 500, 500, 5000)])
    capped = score.method_scores(score.unit_values(rows, _board()))
    assert capped.loc["m", "accuracy"] == pytest.approx(1.1)  # 2.5x the full cache counts as 1.1
    assert capped.loc["m", "overhead"] == 1 and capped.loc["m", "overhead_ratio"] == pytest.approx(5)
    free = score.method_scores(score.unit_values(rows, _board(overhead_allowance=4.5)))
    assert free.loc["m", "overhead"] == pytest.approx(0.5)  # only what exceeds the allowance counts
    with pytest.raises(ValueError, match="full cache's rows are missing"):
        score.unit_values(rows[rows.method != "no_press"], _board())


def test_eligibility_absolute_and_relative():
    def row(accuracy=0.65, memory=0.1, speed=0.04):
        return pd.Series({"accuracy": accuracy, "memory": memory, "speed": speed})

    paper = load_board("paper", "A")
    assert score.eligible(row(), paper) == (False, "memory + speed 0.140 < 0.150")
    assert score.eligible(row(speed=0.05), paper)[0]
    embedded = load_board("cpu", "A")
    best = row(accuracy=0.5, memory=0.5, speed=0.5)
    assert score.eligible(row(accuracy=0.41, memory=0.5, speed=0.5), embedded, best)[0]
    ok, why = score.eligible(row(accuracy=0.39, memory=0.5, speed=0.5), embedded, best)
    assert not ok and "accuracy 0.390 < 0.400" in why
    with pytest.raises(ValueError, match="relative limits"):
        score.eligible(row(), embedded)


def test_paired_gain_is_paired():
    spec = [("no_press", 1.0, f"i{k}", "t", 100, 10, 10, 0) for k in range(6)]
    spec += [("a", 0.5, f"i{k}", "t", s, 5, 5, 0) for k, s in enumerate([100, 0, 100, 0, 100, 100])]
    spec += [("b", 0.5, f"i{k}", "t", s, 5, 5, 0) for k, s in enumerate([100, 0, 100, 0, 100, 0])]
    units = score.unit_values(_rows(spec, full_entries=10), _board())
    gain = score.paired_gain(units, "a", "b")
    assert gain.point == pytest.approx(1 / 6) and gain.lo >= 0  # a >= b on every item: never negative
    assert score.best_baseline(score.method_scores(units)) == "a"


# ------------------------------------------------------------------------------------------ calibration
def test_choose_budgets_on_a_fake_measure():
    curve = {0.95: 0.97, 0.9: 0.92, 0.8: 0.85, 0.75: 0.8, 0.6: 0.6, 0.5: 0.4, 0.4: 0.2, 0.3: 0.1, 0.25: 0.05}
    budgets, table = calibrate.choose_budgets(curve.__getitem__)
    assert budgets == (0.8, 0.6, 0.5)  # the band's two ends and one between them
    assert list(table.in_band) == [False, False, True, True, True, True, False, False, False]
    assert calibrate.choose_budgets(curve.__getitem__, count=5)[0] == (0.8, 0.75, 0.6, 0.5)
    with pytest.raises(calibrate.CalibrationFailed, match="no budget puts the best baseline"):
        calibrate.choose_budgets(lambda k: 0.01)


def test_calibrate_board_runs_once_and_reads_the_best_baseline():
    calls = []

    def run(board):
        calls.append(board.budgets)
        spec = [("no_press", 1.0, f"i{k}", "t", 100, 10, 10, 0) for k in range(2)]
        for keep in board.budgets:  # snapkv keeps `keep` of the score, random half of that
            spec += [("snapkv", keep, f"i{k}", "t", 100 * keep, 5, 5, 0) for k in range(2)]
            spec += [("random", keep, f"i{k}", "t", 50 * keep, 5, 5, 0) for k in range(2)]
        return _rows(spec, full_entries=10)

    budgets, table = calibrate.calibrate_board(run, load_board("smoke", "A"), (0.95, 0.7, 0.5, 0.3))
    assert calls == [(0.95, 0.7, 0.5, 0.3)] and budgets == (0.7, 0.5)
    assert table.best_accuracy.tolist() == pytest.approx([0.95, 0.7, 0.5, 0.3])


def test_items_to_resolve():
    diffs = pd.Series([0.1, -0.1] * 50)  # sd ~ 0.1005
    n = calibrate.items_to_resolve(diffs, gain=0.02)
    assert n == math.ceil((1.959964 * diffs.std() / 0.02) ** 2)
    assert calibrate.resolvable_gain(diffs, n) <= 0.02 < calibrate.resolvable_gain(diffs, n - 5)


# ------------------------------------------------------------------------------------------ leaderboard
def _entry(board, name, overall, kind="baseline", eligible=True, author="baseline"):
    return {"board": board, "name": name, "author": author, "round": 1, "overall": overall, "lo": overall - 0.05,
            "hi": overall + 0.05, "accuracy": overall, "memory": 0.3, "memory_physical": 0.3, "speed": 0.3,
            "overhead": 0.0, "eligible": eligible, "moved": eligible}


def test_leaderboard_from_ledger(tmp_path):
    from cachecraft_lib.arena.scoring.ledger import Ledger, LedgerTampered

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("baseline", _entry("A", "snapkv", 0.5))
    ledger.append("baseline", _entry("A", "no_press", 0.8, eligible=False))
    ledger.append("baseline", _entry("B_online", "knorm", 0.2))
    ledger.append("submission", _entry("A", "mine", 0.6, "submission", author="me"))
    ledger.append("points", {"board": "A", "name": "mine", "author": "me", "points": 10.0})
    ledger.append("rejection", {"board": "A", "name": "bad", "author": "me", "kind": "crash", "message": "boom"})
    ledger.append("submission", _entry("A", "mine", 0.65, "submission", author="me"))  # a later entry replaces it
    events = ledger.events()
    table = leaderboard.leaderboard(events, "A")
    assert table.name.tolist() == ["mine", "snapkv", "no_press"]  # eligible first, by overall; ineligible last
    assert table["rank"].tolist() == [1, 2, 3] and table.overall.iloc[0] == pytest.approx(0.65)
    assert table.points.iloc[0] == 10.0
    assert leaderboard.rejections(events).kind.tolist() == ["crash"]
    paths = leaderboard.write(events, tmp_path / "figs", label="test label")
    assert {p.name for p in paths} >= {"table_arena_leaderboard.md", "fig_arena_leaderboard.png"}
    assert "test label" in (tmp_path / "figs" / "table_arena_leaderboard.md").read_text()
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"overall": 0.5', '"overall": 0.9')
    (tmp_path / "ledger.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerTampered, match="line 1"):
        ledger.events()


# ------------------------------------------------------------------------------------------------- CLI
def test_cli_errors_are_clear_and_lose_nothing(tmp_path, capsys, monkeypatch):
    from cachecraft_lib.arena.scoring.ledger import Ledger

    root = tmp_path / "arena"
    assert main(["arena", "dev", "baseline:snapkv", "--board", "Z", "--profile", "smoke", "--root", str(root)]) == 2
    assert "unknown board 'Z'" in capsys.readouterr().err
    monkeypatch.delenv("CACHECRAFT_ARENA_SECRET", raising=False)
    monkeypatch.setenv("CACHECRAFT_ARENA_SECRET_FILE", str(tmp_path / "no-secret"))
    assert main(["arena", "baselines", "--board", "A", "--profile", "smoke", "--root", str(root)]) == 2
    assert "no arena secret" in capsys.readouterr().err
    ledger = Ledger(root / "ledger.jsonl")
    ledger.append("baseline", _entry("A", "snapkv", 0.5))
    assert main(["arena", "leaderboard", "--profile", "smoke", "--root", str(root)]) == 0
    assert "snapkv" in capsys.readouterr().out
    text = (root / "ledger.jsonl").read_text().replace("0.5", "0.7", 1)
    (root / "ledger.jsonl").write_text(text)
    assert main(["arena", "leaderboard", "--profile", "smoke", "--root", str(root)]) == 2
    assert "line 1" in capsys.readouterr().err
    assert (root / "ledger.jsonl").read_text() == text  # reported, never rewritten
    assert main(["arena", "boards", "--profile", "smoke"]) == 0
    assert "B_offline" in capsys.readouterr().out


# -------------------------------------------------------------------------------------- evaluation
def test_evaluate_on_the_tiny_model():
    """One context per task on smoke board A: the full cache keeps everything; a masking press keeps its
    entries physically; SnapKV's overhead is counted, StreamingLLM's is zero."""
    from cachecraft_lib.arena.board_runner import BoardRunner, baseline_contender
    from cachecraft_lib.models.loading import load_model
    from cachecraft_lib.ruler import generate

    model, tokenizer = load_model("tiny", device="cpu", dtype="float32")
    board = replace(load_board("smoke", "A"), budgets=(0.5,))
    rows = generate(1024, tokenizer, 1, 5, ["niah_single_1"])
    items = rows.assign(item="x/0", context_id="x", length=1024)
    out = BoardRunner(model, tokenizer, board).run(
        items, [baseline_contender(n) for n in ("snapkv", "adasnapkv", "streaming_llm")], progress=False)
    by = out.set_index("method")
    assert list(by.index) == ["no_press", "snapkv", "adasnapkv", "streaming_llm"]
    assert by.loc["no_press", "logical_entries"] == by.loc["no_press", "full_entries"] == by.loc["no_press", "physical_entries"]
    for m in ("snapkv", "streaming_llm"):
        assert by.loc[m, "logical_entries"] == by.loc[m, "physical_entries"]
        assert abs(by.loc[m, "logical_entries"] / by.loc[m, "full_entries"] - 0.5) < 0.01
    assert by.loc["adasnapkv", "physical_entries"] == by.loc["no_press", "physical_entries"]
    assert by.loc["adasnapkv", "logical_entries"] < by.loc["no_press", "logical_entries"]
    assert by.loc["snapkv", "overhead_flops"] > 0 == by.loc["streaming_llm", "overhead_flops"]
    assert by.loc["no_press", "prefill_flops"] > 100 * by.loc["snapkv", "overhead_flops"] / 100
    assert by.loc["no_press", "score"] == 100.0  # the tiny model finds this needle with the full cache
