"""The selection half's per-unit dev values (issue 49, item 2): ``select`` writes them for every shortlisted
child, and the committed file (notebook 08's cpu run, re-scored on the selection half of the dev items)
reproduces each child's ``selection_fitness`` in the committed shortlist, so a reader can check the choice."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from cachecraft_lib.search import selection
from cachecraft_lib.search.seeds import seed_path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "figures" / "samples"
UNITS = SAMPLES / "08_search_arena_selection.csv.gz"
SHORTLISTS = SAMPLES / "08_search_arena_shortlists.csv"


def _committed() -> tuple[pd.DataFrame, pd.DataFrame]:
    if not UNITS.exists():
        pytest.skip("figures/samples/08_search_arena_selection.csv.gz is not committed")
    units = pd.read_csv(UNITS, dtype={"child_id": str, "context_id": str}, float_precision="round_trip")
    return pd.read_csv(SHORTLISTS, dtype={"child_id": str}), units


def test_the_committed_selection_units_reproduce_the_shortlists_selection_fitness():
    shortlist, units = _committed()
    assert list(units.columns) == selection.UNIT_COLUMNS
    assert selection.units_disagree(shortlist, units) == []  # every shortlisted child, to float precision
    per_child = units.groupby(["random_seed", "child_id"]).context_id.apply(lambda c: tuple(sorted(c)))
    assert per_child.nunique() == 1  # one selection half, the same contexts for every child: 16 at cpu, of which
    assert len(per_child.iloc[0]) == 14 and "vt" not in set(units.task)  # task vt's 2 are excluded (full-cache floor)
    assert set(zip(units.random_seed, units.child_id, strict=True)) == set(zip(shortlist.random_seed,
                                                                             shortlist.child_id, strict=True))
    means = selection.unit_means(units)
    for seed, rows in shortlist.groupby("random_seed"):
        chosen = rows[rows.chosen].child_id.item()  # the rule's pick has the highest selection-half mean
        assert means[(seed, chosen)] == pytest.approx(max(means[(seed, c)] for c in rows.child_id), abs=1e-12)


def test_a_changed_row_of_the_selection_units_is_caught():
    shortlist, units = _committed()
    for i in (0, len(units) // 2, len(units) - 1):
        changed = units.copy()
        changed.loc[i, "overall"] += 1e-6
        child = f"{changed.random_seed[i]}/{changed.child_id[i]}"
        assert selection.units_disagree(shortlist, changed) == [child]
    assert selection.units_disagree(shortlist, units.drop(index=units.index[units.child_id == units.child_id[0]]))


def _run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    code = seed_path("v1").read_text()
    (folder / "run_info.txt").write_text("seed=v1\nrandom_seed=5\n")
    (folder / "initial_program.py").write_text(code)
    rows = [{"iteration": i, "parent_id": "seed", "child_id": c, "child_code": code + f"# {c}\n",
             "child_metrics": {"combined_score": f, "valid": 1.0}, "llm_response": f"Proposed change: {c}\n"}
            for i, (c, f) in enumerate([("a", 0.9), ("b", 0.5), ("c", 0.7)], 1)]
    (folder / "evolution_trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


class _Fitness:
    """A selection-half fitness whose results carry a dev report's per-unit rows, as ``BoardFitness``'s do."""

    def __init__(self, values: dict[str, list[float]]) -> None:
        self.values = values

    def evaluate(self, sources: list[str]) -> list[SimpleNamespace]:
        out = []
        for source in sources:
            tag = source.rsplit("# ", 1)[1].strip()
            name = f"cand-{tag}"
            units = pd.DataFrame({"method": [name, name, name, "snapkv"], "context_id": ["x/0", "x/1", "y/0", "y/0"],
                                  "task": ["x", "x", "y", "y"], "overall": [*self.values[tag], 0.5]})
            mean = units[units.method == name].groupby("task").overall.mean().mean()
            out.append(SimpleNamespace(name=name, fitness=float(mean), report={"units": units, "gain": None}))
        return out


def test_select_writes_every_shortlisted_childs_per_unit_selection_values(tmp_path):
    run = _run(tmp_path / "run")
    picked = selection.select(run, _Fitness({"a": [0.2, 0.4, 0.1], "c": [0.9, 0.7, 0.6], "b": [0.0, 0.0, 0.0]}),
                              top_k=2)
    written = pd.read_csv(run / selection.SELECTED / selection.UNITS_FILE, dtype={"child_id": str})
    assert list(written.columns) == selection.UNIT_COLUMNS and set(written.child_id) == {"a", "c"}  # the top 2
    assert (written.random_seed == 5).all() and len(written) == 6  # three contexts each, no baseline row
    shortlist = pd.read_csv(run / selection.SELECTED / "shortlist.csv", dtype={"child_id": str}).assign(random_seed=5)
    assert selection.units_disagree(shortlist, written) == [] and picked.child_id == "c"
    assert selection.unit_means(written)[(5, "c")] == pytest.approx((0.8 + 0.6) / 2)  # task means, then their mean
