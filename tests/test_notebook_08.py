"""Notebook 08 (the pre-registered search on a board's dev items, chosen on the selection half, tested on a fresh
secret) under smoke, values read back: the order of events in the ledger, the halves each step used, the
pooled result recomputed by docs/uncertainty.md's recipe from the per-unit file the notebook wrote, one test look
per plan and seed, and each chosen child's selection-half estimate recomputed from the selection file."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_search_arena_recipe import run_recipe

from cachecraft_lib.report.notebooks import list_notebooks, run_notebook
from cachecraft_lib.search import selection
from cachecraft_lib.search.seed_pool import pool_seeds


@pytest.mark.slow
def test_notebook_08_search_in_the_arena(tmp_path):
    figures = tmp_path / "f"
    r = run_notebook(list_notebooks(["08"])[0], "smoke", out_dir=tmp_path, figures=figures,
                     parameters={"ROOT": str(tmp_path / "arena")}).records
    check(r, figures)
    assert r["mode"] == "new"
    replay_reproduces_the_round(r, figures, tmp_path)


def replay_reproduces_the_round(r: dict, figures, tmp_path) -> None:
    """Revealing the round's secret beside its ledger turns the next run into a replay (ROUND="auto"): the same plan
    and secret in a fresh arena, every table, figure and per-unit file byte for byte, the round's record untouched."""
    from pathlib import Path

    revealed = figures / "samples" / "08_search_arena_revealed_secret.txt"
    revealed.write_text(Path(r["secret_file"]).read_text())
    before = {p.relative_to(figures): p.read_bytes() for p in figures.rglob("*") if p.is_file()}
    again = run_notebook(list_notebooks(["08"])[0], "smoke", out_dir=tmp_path / "replay", figures=figures,
                         parameters={"ROOT": str(tmp_path / "arena-replay")}).records
    assert again["mode"] == "replay" and again["kinds"] == r["kinds"]
    after = {p.relative_to(figures): p.read_bytes() for p in figures.rglob("*") if p.is_file()}
    assert sorted(after) == sorted(before)
    assert [str(p) for p in sorted(before) if before[p] != after[p]] == []


def check(r: dict, figures) -> None:
    """The executed notebook's records and files (``figures``: where it wrote them)."""
    assert r["board"] == "A" and r["seed"] == "v1" and (r["generations"], r["population"]) == (1, 2)
    assert r["random_seeds"] == [0, 1] and r["top_k"] == 2
    kinds = r["kinds"]  # the plan first, the round's commitment (its fresh secret) after it, then the entries
    assert kinds[0] == "plan" and r["plan_seq"] == 0 < r["round_seq"] == kinds.index("round")
    assert kinds.count("submission") == 3 and kinds.count("plan") == 1 and "review" in kinds  # FRC, two seeds
    search, selection_half = r["halves"]
    assert search + selection_half == 6 and search == len(r["search_contexts"])
    for s in ("0", "1"):
        assert sorted(r["fitness_contexts"][s]) == sorted(r["search_contexts"])  # it climbed on the search half only
        assert r["fitness"][s] == sorted(r["fitness"][s]) and len(r["fitness"][s]) == 2
        chosen, origin = r["chosen"][s], r["origins"][s]
        assert chosen["child_id"] in chosen["shortlist"] and len(chosen["shortlist"]) <= 2
        assert origin["registration"] == "preregistered" and len(origin["plan"]) == 16
        assert all(len(origin.get(k, "")) == 64 for k in selection.DIGEST_KEYS)  # the selection bound in the ledger
        assert origin["child_id"] == chosen["child_id"] and origin["random_seed"] == int(s)
    assert r["claims"] == {"search-v1-0": True, "search-v1-1": True}  # each label holds against the ledger
    assert r["claim_looks"] == {"search-v1-0": 1, "search-v1-1": 1}  # one test look per plan and seed, stated
    looks = pd.DataFrame(r["plan_looks"])
    planned = looks[looks.plan == r["origins"]["0"]["plan"]]
    assert sorted(planned.random_seed) == [0, 1] and planned.looks.tolist() == [1, 1]
    assert looks[looks.plan == "no plan"].looks.sum() == kinds.count("test_look") - 2  # baselines' and FRC's
    assert 0 < r["frc_search_half"] <= 1.5  # FRC on the search half: the figure's reference line
    units = pd.read_csv(figures / "samples" / "08_search_arena_selection.csv.gz", dtype={"child_id": str})
    means = selection.unit_means(units)  # the committed per-unit file recomputes each chosen child's estimate
    for s in ("0", "1"):
        chosen = r["chosen"][s]
        assert sorted(units[units.random_seed == int(s)].child_id.unique()) == sorted(chosen["shortlist"])
        assert means[(int(s), chosen["child_id"])] == pytest.approx(chosen["estimate"], abs=1e-12)
    pooled, per_seed = r["pooled"], pd.DataFrame(r["per_seed"])
    assert pooled["lo"] <= pooled["gain"] <= pooled["hi"] and pooled["beats"] == int(per_seed.beats.sum())
    assert pooled["gain"] == pytest.approx(per_seed.gain.mean(), abs=1e-9)  # the mean over seeds, not the best
    assert list(per_seed.beats) == [lo > r["threshold"] for lo in per_seed.lo]
    assert "FABRICATED_EVIDENCE" not in r["review"]["flags"] and r["review"]["soundness"] == 3
    assert "embedded tiny model" in r["label"]
    table = pd.read_csv(figures / "table_search_arena_gains.csv")
    row = table[(table.random_seed.astype(str) == "pooled") & (table.against == "frc")].iloc[0]
    bar = table[table.split.str.startswith("dev")].against.iloc[0]  # the selection half's best baseline
    against_bar = table[table.split.str.startswith("test") & (table.against == bar)]
    assert list(against_bar.random_seed.astype(str)) == ["0", "1", "pooled", "a run"] and bar != "frc"
    units = pd.read_csv(figures / "samples" / "08_search_arena.csv.gz")
    assert bar in set(units.method)  # the baselines' per-unit values are in the file: the bar's rows recompute
    names = {0: "search-v1-0", 1: "search-v1-1"}
    of = {m: rows[["context_id", "task", "overall"]] for m, rows in units.groupby("method")}
    again = pool_seeds({s: of[n] for s, n in names.items()}, names, of[bar], bar, r["threshold"])
    bar_pooled = against_bar[against_bar.random_seed.astype(str) == "pooled"].iloc[0]
    assert (bar_pooled.gain, bar_pooled.lo, bar_pooled.hi) == pytest.approx(
        (again.pooled_gain, again.pooled_lo, again.pooled_hi), abs=1e-4)
    bar_run = against_bar[against_bar.random_seed.astype(str) == "a run"].iloc[0]
    assert (bar_run.gain, bar_run.lo, bar_run.hi) == pytest.approx((again.run.point, again.run.lo, again.run.hi), abs=1e-4)
    dev = table[table.split.str.startswith("dev")]  # smoke: one selection-half context per task, so no interval
    assert dev.lo.isna().all() and (dev.verdict == "no interval (one context per task)").all()
    assert (row.gain, row.lo, row.hi) == pytest.approx((pooled["gain"], pooled["lo"], pooled["hi"]), abs=1e-4)
    assert run_recipe(_as_figures(figures)) == pytest.approx(
        (pooled["gain"], pooled["lo"], pooled["hi"]), abs=1e-6)  # the per-unit file reproduces it
    assert "fresh secret" in (figures / "table_search_arena_gains.md").read_text()
    check_controls(r, figures, table, bar)
    check_criteria(r, figures, table, bar)
    ledger = [json.loads(line) for line in (figures / "samples" / "08_search_arena_ledger.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in ledger] == kinds  # the public ledger, committed beside the per-unit file
    for name in ("fig_search_arena_dynamics.png", "table_search_arena_generations.md"):
        assert (figures / name).exists()


def check_controls(r: dict, figures, table: pd.DataFrame, bar: str) -> None:
    """Issue 56: the plan named its comparators and controls; every seed ran random search at the search's budget
    (no selection: every parent the seed), the seed program and each control were scored on the test items (one
    recorded look each), and the run rows (seeds resampled) recompute from the per-unit file."""
    from test_two_level_bootstrap import _recipe

    assert r["plan_comparators"] == ["frc", "best baseline of the selection half"]
    assert r["plan_controls"] == ["seed program", "random search at the search's budget"]
    plan = json.loads((figures / "samples" / "08_search_arena_ledger.jsonl").read_text().splitlines()[0])["payload"]
    assert "at least 4 of 5 seeds are non-inferior to FRC" in plan["notes"]  # the criteria, before the run
    assert set(r["budgets"]) == {"0", "1"} and min(r["budgets"].values()) >= 1  # the search's full evaluations
    for s in ("0", "1"):
        control = r["controls"][s]
        assert control["trace"] == r["budgets"][s] and len(control["parents"]) == 1  # the seed alone: no selection
        assert control["child_id"] in control["shortlist"]
    assert sorted(r["control_looks"]) == ["random-v1-0", "random-v1-1", "seed-v1"]  # counted in the ledger
    units = pd.read_csv(figures / "samples" / "08_search_arena.csv.gz")
    assert {"seed-v1", "random-v1-0", "random-v1-1"} <= set(units.method)  # a dropped control fails here
    test = table[table.split.str.startswith("test")]
    for against in ("frc", bar, "seed-v1", "random search (same seed)"):
        assert list(test[test.against == against].random_seed.astype(str)) == ["0", "1", "pooled", "a run"]
    assert set(r["runs"]) == {"frc", bar, "seed program", "random search"}
    for key, comparator in [("frc", None), ("seed program", 'u["seed-v1"]'),
                            ("random search", 'u[c.replace("search-", "random-")]')]:
        run = r["runs"][key]
        assert run["seeds"] == 2 and run["seed_level"]  # the seed level was resampled
        found = _recipe(_as_figures(figures), comparator)
        assert found == pytest.approx((run["gain"], run["lo"], run["hi"]), abs=1e-9)
    seeds = pd.read_csv(figures / "table_search_arena_seeds.csv")
    assert list(seeds.random_seed) == [0, 1] and list(seeds.budget) == [r["budgets"]["0"], r["budgets"]["1"]]
    by_evals = pd.read_csv(figures / "table_search_arena_controls_dev.csv").set_index("evaluations")
    assert by_evals.index[0] == 0 and by_evals.index[-1] >= max(r["budgets"].values()) - 0.5
    assert set(by_evals.columns) == {
        f"{engine}, seed {s}" for engine in ("search", "random search") for s in (0, 1)}


def check_criteria(r: dict, figures, table: pd.DataFrame, bar: str) -> None:
    """Issue 56: the plan carried its pass criteria as data (in its hash), the selection half's size per task and
    the author's room for every seed's entry; one verdict per criterion, recomputed here from the gains table."""
    from cachecraft_lib.search import plan_criteria as pc
    from cachecraft_lib.search import preregister

    plan = json.loads((figures / "samples" / "08_search_arena_ledger.jsonl").read_text().splitlines()[0])["payload"]
    assert plan["criteria"] == r["plan_criteria"] and preregister.plan_hash(plan) == plan["plan_hash"]
    assert [c.against for c in pc.from_payload(plan["criteria"])] == [
        "frc", "frc", preregister.RANDOM_CONTROL, preregister.SEED_CONTROL]  # board A's four criteria
    assert plan["selection_per_task"] == r["selection_per_task"] == 1  # smoke: recorded, not refused
    assert r["entries_left"] >= len(r["random_seeds"])  # every seed's entry had room before the secret was drawn
    test = table[table.split.str.startswith("test")].assign(random_seed=lambda t: t.random_seed.astype(str))
    rows_of = {pc.FRC: "frc", preregister.SELECTION_BEST: bar, preregister.SEED_CONTROL: "seed-v1",
               preregister.RANDOM_CONTROL: "random search (same seed)"}
    judged = pd.DataFrame(r["criteria"]).set_index("criterion")
    assert len(judged) == len(plan["criteria"]) and set(judged.verdict) <= {pc.MET, pc.NOT_MET, pc.INCONCLUSIVE}
    for c in pc.from_payload(plan["criteria"]):
        mine = test[test.against == rows_of[c.against]]
        seeds = [(lo, hi) for lo, hi in mine[~mine.random_seed.isin(["pooled", "a run"])][["lo", "hi"]].to_numpy()]
        run = mine[mine.random_seed == "a run"].iloc[0]
        again = pc.judge_one(c, seeds, (run.lo, run.hi, True))
        assert judged.verdict[c.name] == again.verdict, c.name  # rounding to 4 places cannot move a smoke verdict
    saved = pd.read_csv(figures / "table_search_arena_criteria.csv")
    assert list(saved.verdict) == list(judged.verdict)


def _as_figures(folder):
    """The recipe reads ``figures/samples/...`` from its working folder: a folder whose ``figures`` is ours."""
    root = folder.parent / "recipe"
    root.mkdir(exist_ok=True)
    if not (root / "figures").exists():
        (root / "figures").symlink_to(folder)
    return root


@pytest.mark.slow
def test_notebook_08_on_board_b_offline_writes_its_own_files(tmp_path):
    """Another board's run keeps board A's files: its tables and samples carry the board's name, and its label says
    what a CPU verdict on a query-agnostic board means."""
    figures = tmp_path / "f"
    r = run_notebook(list_notebooks(["08"])[0], "smoke", out_dir=tmp_path, figures=figures,
                     parameters={"ROOT": str(tmp_path / "arena"), "BOARD": "B_offline"}).records
    assert r["board"] == "B_offline" and "query-agnostic compression" in r["label"]
    names = {p.name for p in figures.rglob("*") if p.is_file()}
    assert {"table_search_arena_gains_B_offline.csv", "08_search_arena_B_offline.csv.gz",
            "08_search_arena_selection_B_offline.csv.gz", "08_search_arena_B_offline_ledger.jsonl"} <= names
    assert not {n for n in names if "search_arena" in n and "B_offline" not in n}  # nothing under board A's names
    assert "query-agnostic" in (figures / "table_search_arena_gains_B_offline.md").read_text()
