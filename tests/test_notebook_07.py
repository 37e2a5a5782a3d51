"""Notebook 07 (the arena) under the smoke profile, twice: its values read back from the first run, and every
table of the two runs byte-identical (the public demonstration secret draws the same test items; about 6 minutes
on two cores for both runs)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from notebook_pairs import SmokeRun, run_pair

SUBMISSION = Path(__file__).parent / "assets" / "arena_boards" / "snap_nopool"


TABLES = (".csv", ".md", ".tex", ".gz")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Notebook 07 run twice in fresh folders, at the same time (``notebook_pairs``): (records, figures folder)
    of each."""
    roots = [tmp_path_factory.mktemp(run) for run in ("one", "two")]
    pair = run_pair("07", tuple(SmokeRun(root, {"ROOT": str(root / "arena"), "SUBMISSION": str(SUBMISSION)})
                                for root in roots))
    return [(run.records, root / "f") for run, root in zip(pair, roots, strict=True)]


@pytest.mark.slow
def test_notebook_07_regenerates_its_tables_exactly(two_runs):
    one, two = ({p.relative_to(f): p.read_bytes() for p in sorted(f.rglob("*")) if p.suffix in TABLES}
                for _, f in two_runs)
    assert Path("table_arena_leaderboard.csv") in one and Path("samples/07_arena.csv.gz") in one
    assert sorted(one) == sorted(two)
    samples = Path("samples/07_arena.csv.gz")  # compared as a frame: its overhead_ratio is a wall-clock reading
    differ = [str(p) for p in one if p != samples and one[p] != two[p]]
    assert not differ, f"tables differ between two runs: {differ}"
    a, b = (pd.read_csv(f / samples).drop(columns=["overhead_ratio"]) for _, f in two_runs)
    pd.testing.assert_frame_equal(a, b, check_exact=True)  # every score of every unit, exactly
    assert b"PUBLIC demonstration secret" in one[Path("table_arena_leaderboard.md")]


@pytest.mark.slow
def test_notebook_07_arena(two_runs):
    r, figures = two_runs[0]
    assert r["boards"] == ["A", "B_online", "B_offline", "C"] and r["budgets"]["A"] == [0.75, 0.5]
    assert r["budgets"]["C"] == [0.75]
    for rows in r["baselines"].values():
        by = {row["method"]: row for row in rows}
        assert by["no_press"]["accuracy"] == pytest.approx(1.0) and by["no_press"]["memory"] == 0
        assert all(row["lo"] - 1e-9 <= row["overall"] <= row["hi"] + 1e-9 for row in rows)
        assert all(0 < row["memory"] < 1 for m, row in by.items() if m != "no_press")
    for s in r["sizing"]:  # every board scored on test (A, C here; B by the post methods' arena): counted as scored
        assert 0 < s["test units scored"] <= s["test units drawn"] and s["test tasks not scored"] != "not scored in this run"
        assert s["units for 0.02 (80% power)"] > s["test units scored"] and s["gain resolved"] > 0.02
    entry = r["entry"]
    assert r["submission"] == "snap-nopool" and entry["gain_lo"] <= entry["gain"] <= entry["gain_hi"]
    assert entry["moved"] == (entry["gain_lo"] > 0 and entry["eligible"])
    # A's four baselines, then C's six; four entries (example, search program, C example, renamed SnapKV); 2 reviews
    assert r["kinds"][0] == "round" and r["kinds"].count("baseline") == 10 and r["kinds"].count("points") == 4
    assert r["kinds"][-2:] == ["review", "review"]
    assert {row["name"] for row in r["leaderboard"]} == {"snapkv", "tova", "random", "no_press", "snap-nopool"}
    search = r["search_entry"]  # no search run under smoke: the shipped V1 program stands in, and says so
    assert "stands in" in r["search_origin"] and search["gain_lo"] <= search["gain"] <= search["gain_hi"]
    # test items come from a throwaway secret per run, so only the dev items' numbers can be pinned
    assert r["dev_gain"]["point"] == pytest.approx(-0.266, abs=1e-3)
    assert r["dev_gain"]["lo"] == pytest.approx(-0.466, abs=1e-3) and r["dev_gain"]["hi"] == pytest.approx(-0.066, abs=1e-3)
    c_entry = r["c_entry"]
    assert r["c_submission"] == "sink-window" and c_entry["lo"] <= c_entry["overall"] <= c_entry["hi"]
    assert c_entry["gain_lo"] <= c_entry["gain"] <= c_entry["gain_hi"]
    copy, example = r["reviews"]["echo-salience"], r["reviews"]["snap-nopool"]
    assert copy["flags"] == ["UNDISCLOSED_PRIOR_ART"] and copy["novelty"] == 0  # a renamed SnapKV
    assert example["flags"] == [] and example["novelty"] == 1  # names SnapKV as what it builds on
    judged = {row["name"]: row for row in r["judged"]}
    assert judged["echo-salience"]["points"] == 0  # the flag took its points
    replay = {row["name"]: row for row in r["replay"]}
    assert replay["agent2-002 spanvote"]["post"] == 0 < replay["agent2-002 spanvote"]["frozen_bar"]
    assert "embedded tiny model" in r["label"]
    assert "nb05-search-best" in judged and "search-best" not in judged  # notebook 05's program, named for it
    post = {row["method"]: row for row in r["post_methods"]}  # the post's four methods, dev and test (own ledger)
    assert sorted(post) == ["kvprior", "probevr", "spanvote", "wherewhat_a"]
    for row in post.values():
        assert row["lo"] <= row["overall"] <= row["hi"] and row["gain_lo"] <= row["gain"] <= row["gain_hi"]
        assert row["test_lo"] <= row["test_overall"] <= row["test_hi"]
        assert row["test_gain_lo"] <= row["test_gain"] <= row["test_gain_hi"]
    assert post["spanvote"]["board"] == "B_offline" and post["spanvote"]["post_board"] == "A"
    assert post["kvprior"]["bar_baseline"] == "h2o"  # the post's bar, run on this board
    # the post methods' table recomputed from the samples file: dev rows of this arena, test rows of their own
    from cachecraft_lib.arena.scoring.score import method_scores

    samples = pd.read_csv(figures / "samples" / "07_arena.csv.gz")
    for method, row in post.items():
        for split, arena, prefix in (("dev", "main", ""), ("test", "post_methods", "test_")):
            units = samples[(samples.split == split) & (samples.arena == arena) & (samples.board == row["board"])]
            again = method_scores(units).loc[method.replace("_", "-")]  # the submission's name
            assert [again.overall, again.lo, again.hi] == pytest.approx(
                [row[f"{prefix}overall"], row[f"{prefix}lo"], row[f"{prefix}hi"]], abs=1e-6), (method, split)  # ledger: 6 dp
    for name in ("table_arena_boards.md", "table_arena_baselines_dev.csv", "table_arena_sizing.md",
                 "table_arena_leaderboard.md", "fig_arena_leaderboard.png", "table_arena_points_replay.md",
                 "table_arena_reviews.md", "table_arena_judge_calibration.md",
                 "table_arena_post_methods.md"):
        assert (figures / name).exists()


def _board(**changes):
    from dataclasses import replace

    from cachecraft_lib.arena.boards.boards import load_board

    return replace(load_board("smoke", "A"), **changes)


def _units(methods, tasks, contexts_per_task, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"method": m, "context_id": f"{t}-{k}", "task": t, "overall": float(rng.random())}
                         for m in methods for t in tasks for k in range(contexts_per_task)])


def test_sizing_counts_the_test_units_scored_not_drawn(tmp_path):
    """A board drawing 3 tasks x 4 contexts whose test split scored 2 tasks (the full cache under the floor on
    the third): 12 drawn, 8 scored, and the gains resolved are those of 8 units (fast, synthetic)."""
    from cachecraft_lib.arena import calibration
    from cachecraft_lib.arena.sizing import drawn_test_units, scored_test_units, sizing_table

    board = _board(tasks=("niah_single_1", "vt", "qa_1"), lengths=(1024,), items={"dev": 4, "test": 4})
    folder = tmp_path / "arena" / "private" / "round1" / "A"
    folder.mkdir(parents=True)
    _units(["no_press"], ["niah_single_1", "qa_1"], 4).to_parquet(folder / "baseline-no_press.parquet")
    _units(["snapkv"], ["niah_single_1", "qa_1"], 4).to_parquet(folder / "baseline-snapkv.parquet")
    scored = scored_test_units([tmp_path / "arena", tmp_path / "nowhere"])
    assert drawn_test_units(board) == 12 and scored["A"].units == 8 and scored["A"].tasks == ("niah_single_1", "qa_1")
    dev = _units(["snapkv", "tova", "no_press"], board.tasks, 4, seed=1)
    table = sizing_table({"A": board, "B": _board(name="B")}, {"A": dev, "B": dev}, {"A": ["snapkv", "tova"],
                                                                                     "B": ["snapkv", "tova"]}, scored)
    a, b = table.set_index("board").loc["A"], table.set_index("board").loc["B"]
    assert a["test units drawn"] == 12 and a["test units scored"] == 8 and a["test tasks not scored"] == "vt"
    wide = dev.pivot_table(index="context_id", columns="method", values="overall")
    assert a["gain resolved"] == pytest.approx(calibration.resolvable_gain(wide.snapkv - wide.tova, 8))
    assert b["test tasks not scored"] == "not scored in this run" and pd.isna(b["gain resolved"])


def test_arena_samples_carry_the_post_methods_dev_and_test_units(tmp_path):
    """KeepDevUnits keeps the dev units of the method each dev report scored; the samples hold them beside the
    baselines' dev units and each arena folder's test units, tagged by folder (fast, synthetic)."""
    from types import SimpleNamespace

    from cachecraft_lib.arena.unit_samples import KeepDevUnits, arena_samples

    class FakeArena:
        profile, boards = "smoke", {"A": None}

        def dev(self, board, contender):
            units = _units([contender.name, "snapkv", "no_press"], ["qa_1"], 2)
            return {"method": contender.name, "units": units, "board": board}

    kept = KeepDevUnits(FakeArena())
    assert kept.profile == "smoke" and kept.dev("A", SimpleNamespace(name="wherewhat_a"))["board"] == "A"
    assert list(kept.units[0].method.unique()) == ["wherewhat_a"] and set(kept.units[0].board) == {"A"}
    for root, name in ((tmp_path / "main", "frc"), (tmp_path / "post", "wherewhat_a")):
        folder = root / "private" / "round1" / "A"
        folder.mkdir(parents=True)
        _units([name], ["qa_1"], 2).to_parquet(folder / "entry-3.parquet")
    samples = arena_samples({"A": _units(["snapkv", "no_press"], ["qa_1"], 2)},
                            {"main": tmp_path / "main", "post_methods": tmp_path / "post"}, extra_dev=kept.units)
    dev, test = samples[samples.split == "dev"], samples[samples.split == "test"]
    assert set(dev.method) == {"snapkv", "no_press", "wherewhat_a"} and set(dev.arena) == {"main"}
    assert set(test.method) == {"frc", "wherewhat_a"} and set(samples.board) == {"A"}
    assert test.set_index("method").arena.to_dict() == {"frc": "main", "wherewhat_a": "post_methods"}
