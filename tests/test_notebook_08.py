"""Notebook 08 (the search on a board's dev items, its best submitted through the arena) under smoke, values read back."""

from __future__ import annotations

import pytest

from cachecraft_lib.report.notebooks import list_notebooks, run_notebook


@pytest.mark.slow
def test_notebook_08_search_in_the_arena(tmp_path):
    r = run_notebook(list_notebooks(["08"])[0], "smoke", out_dir=tmp_path, figures=tmp_path / "f",
                     parameters={"ROOT": str(tmp_path / "arena")}).records
    assert r["board"] == "A" and r["seed"] == "v1" and (r["generations"], r["population"]) == (2, 3)
    assert r["children"] == 6 and len(r["fitness"]) == 3  # the seed's generation 0, then two generations
    assert r["fitness"] == sorted(r["fitness"])  # best so far never falls
    assert all(0 <= p <= 1 for p in r["gate_pass_rate"])
    origin = r["origin"]  # the ledger records the entry as the search run's
    assert origin["kind"] == "search" and origin["seed"] == "v1" and origin["iterations"] == 6
    e, f = r["entry"], r["vs_frc"]
    assert e["gain_lo"] <= e["gain"] <= e["gain_hi"] and f["lo"] <= f["gain"] <= f["hi"]
    assert e["moved"] == (e["gain_lo"] > r["threshold"] and e["eligible"])
    assert r["dev"]["overall"] == pytest.approx(r["fitness"][-1], abs=1e-6)  # dev report (6 decimals) = the fitness
    assert "FABRICATED_EVIDENCE" not in r["review"]["flags"] and r["review"]["soundness"] == 3
    assert r["kinds"].count("submission") == 2 and "review" in r["kinds"]
    assert "embedded tiny model" in r["label"]
    for name in ("fig_search_arena_dynamics.png", "table_search_arena_generations.md", "table_search_arena_gains.md"):
        assert (tmp_path / "f" / name).exists()
