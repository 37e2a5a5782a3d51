"""The selection half's per-unit dev values (issue 49, item 2): ``select`` writes them for every shortlisted
child, and the committed file (notebook 08's cpu run, re-scored on the selection half of the dev items)
reproduces each child's ``selection_fitness`` in the committed shortlist, so a reader can check the choice.

What the committed files are checked against, each without a model (red team r7): the per-unit file's contexts
are ``split_dev`` of the board's dev context ids (``selection.dev_context_ids``, from the board's public
settings) by the plan's split seed, selection half, less the excluded task; the shortlist's ``chosen`` is the
rule's pick (highest selection-half score, ties to the smaller program digest, which ``board_search`` writes as
the child id's ``cand-<digest>`` prefix); the ledger's pre-registered entries are those chosen children; the
committed programs (figures/samples/08_search_arena_programs/) are their code (digest) and convert to the
``method.py`` whose SHA-256 the ledger's submission records.

What they cannot catch: a per-unit value changed inside a task with another changed to keep the task mean (and
so ``selection_fitness``) unchanged. The committed data hold no second record of the per-unit values: this run's
selected.json predates the files' digests. A run selected since records ``shortlist_sha256`` and
``selection_units_sha256`` in selected.json (tested below); once submit-search carries them into the ledger's
origin, the committed file can be checked against the ledger byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from test_search_preregister import _run

from cachecraft_lib.arena.boards.boards import load_board
from cachecraft_lib.search import selection
from cachecraft_lib.search.candidate_result import candidate_name
from cachecraft_lib.search.submit import converted_method

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "figures" / "samples"
EXCLUDED_TASK = "vt"  # its selection-half contexts are left out of the file (the full cache's floor)
BOARDS = ["A", "B_offline"]  # notebook 08's committed cpu runs: board A's files plain, another board's suffixed
CONTEXTS = {"A": 28, "B_offline": 28}  # selection-half contexts per child: 32 (4 per task), less vt's 4


@dataclass(frozen=True)
class Committed:
    """One board's committed notebook 08 files (``figures/samples/``), named as the notebook names them: board A's
    plain, another board's with ``_<board>`` after the stem (``OUT`` in the notebook)."""

    board: str

    def _sample(self, tail: str, stem: str = "08_search_arena") -> Path:
        return SAMPLES / f"{stem}{'' if self.board == 'A' else '_' + self.board}{tail}"

    @property
    def units(self) -> Path:
        return self._sample(".csv.gz", "08_search_arena_selection")

    @property
    def shortlists(self) -> Path:
        return self._sample("_shortlists.csv")

    @property
    def ledger(self) -> Path:
        return self._sample("_ledger.jsonl")

    @property
    def programs(self) -> Path:
        return self._sample("_programs")


def _committed(board: str = "A") -> tuple[pd.DataFrame, pd.DataFrame]:
    files = Committed(board)
    if not files.units.exists():
        pytest.skip(f"{files.units.name} is not committed")
    units = pd.read_csv(files.units, dtype={"child_id": str, "context_id": str}, float_precision="round_trip")
    return pd.read_csv(files.shortlists, dtype={"child_id": str}), units


@pytest.mark.parametrize("board", BOARDS)
def test_the_committed_selection_units_reproduce_the_shortlists_selection_fitness(board):
    shortlist, units = _committed(board)
    assert list(units.columns) == selection.UNIT_COLUMNS
    assert selection.units_disagree(shortlist, units) == []  # every shortlisted child, to float precision
    per_child = units.groupby(["random_seed", "child_id"]).context_id.apply(lambda c: tuple(sorted(c)))
    assert per_child.nunique() == 1  # one selection half, the same contexts for every child, less task vt's
    assert len(per_child.iloc[0]) == CONTEXTS[board] and "vt" not in set(units.task)  # (the full cache's floor)
    assert set(zip(units.random_seed, units.child_id, strict=True)) == set(zip(shortlist.random_seed,
                                                                             shortlist.child_id, strict=True))
    means = selection.unit_means(units)
    for seed, rows in shortlist.groupby("random_seed"):
        chosen = rows[rows.chosen].child_id.item()  # the rule's pick has the highest selection-half mean
        assert means[(seed, chosen)] == pytest.approx(max(means[(seed, c)] for c in rows.child_id), abs=1e-12)


@pytest.mark.parametrize("board", BOARDS)
def test_a_changed_row_of_the_selection_units_is_caught(board):
    shortlist, units = _committed(board)
    for i in (0, len(units) // 2, len(units) - 1):
        changed = units.copy()
        changed.loc[i, "overall"] += 1e-6
        child = f"{changed.random_seed[i]}/{changed.child_id[i]}"
        assert selection.units_disagree(shortlist, changed) == [child]
    assert selection.units_disagree(shortlist, units.drop(index=units.index[units.child_id == units.child_id[0]]))


def _ledger(board: str = "A") -> list[dict]:
    return [json.loads(line) for line in Committed(board).ledger.read_text().splitlines()]


def _plan(board: str = "A") -> dict:
    return next(e["payload"] for e in _ledger(board) if e["kind"] == "plan")


def _entries(board: str = "A") -> dict[int, dict]:
    """The ledger's pre-registered search entries by random seed."""
    return {e["payload"]["origin"]["random_seed"]: e["payload"] for e in _ledger(board) if e["kind"] == "submission"
            and (e["payload"].get("origin") or {}).get("registration") == "preregistered"}


DEV_ITEMS_AT_PLAN = {"A": 8, "B_offline": 8}  # cpu.yaml when the committed notebook 08 rounds ran (2026-12-07)


def half_problems(units: pd.DataFrame, board: str = "A") -> list[str]:
    """Where the per-unit file's contexts are not the plan's selection half (less the excluded task)."""
    plan = _plan(board)
    assert plan["board"] == board
    board = load_board(plan["profile"], plan["board"])
    # the board as these rounds ran it: cpu.yaml's dev items per task were raised to 8 afterwards (2026-12-07, a
    # selection half of 4 per task), which draws other halves; the committed files keep their own
    board = dataclasses.replace(board, items={**board.items, "dev": DEV_ITEMS_AT_PLAN[plan["board"]]})
    halves = selection.split_dev(selection.dev_context_ids(board), plan["split_seed"])
    expected = {c for c in halves.selection if f"/{EXCLUDED_TASK}/" not in c}
    problems = [f"seed {s} child {c}: contexts are not the selection half" for (s, c), ids in
                units.groupby(["random_seed", "child_id"]).context_id if set(ids) != expected or len(ids) != len(expected)]
    if set(units.context_id) & set(halves.search):
        problems.append("search-half contexts in the selection file")
    if any(f"/{t}/" not in c for t, c in zip(units.task, units.context_id, strict=True)):
        problems.append("a row's task is not its context's")
    return problems


def rule_pick(rows: pd.DataFrame) -> str:
    """``selection.choose`` on a shortlist: the highest selection-half score, ties to the smaller program digest
    (``candidate_name(code)``, the ``cand-<digest>`` prefix of the child id ``board_search`` writes)."""
    best = rows[rows.selection_fitness == rows.selection_fitness.max()]
    return min(zip(best.child_id.str.rsplit("-", n=1).str[0], best.child_id, strict=True))[1]


def choice_problems(shortlist: pd.DataFrame, board: str = "A") -> list[str]:
    """Seeds whose ``chosen`` row is not the rule's pick, and ledger entries that are not the chosen child."""
    entries = _entries(board)
    problems = []
    for seed, rows in shortlist.groupby("random_seed"):
        chosen = list(rows[rows.chosen].child_id)
        if chosen != [rule_pick(rows)]:
            problems.append(f"seed {seed}: chosen {chosen}, the rule picks {rule_pick(rows)}")
        if seed not in entries or [entries[seed]["origin"]["child_id"]] != chosen:
            problems.append(f"seed {seed}: the ledger's entry is not the chosen child")
    if set(entries) != set(shortlist.random_seed):
        problems.append(f"ledger seeds {sorted(entries)} != shortlist seeds {sorted(set(shortlist.random_seed))}")
    return problems


@pytest.mark.parametrize("board", BOARDS)
def test_the_committed_selection_units_are_the_plans_selection_half(board):
    _, units = _committed(board)
    assert half_problems(units, board) == []


@pytest.mark.parametrize("board", BOARDS)
def test_the_shortlists_chosen_children_are_the_rules_picks_and_the_ledgers_entries(board):
    shortlist, _ = _committed(board)
    assert choice_problems(shortlist, board) == []


def _search_half_ids(units: pd.DataFrame, board: str = "A") -> pd.DataFrame:
    """r7's wrong file: the same rows labelled with the search half's contexts of the same tasks."""
    plan = _plan(board)
    halves = selection.split_dev(selection.dev_context_ids(load_board(plan["profile"], plan["board"])),
                                 plan["split_seed"])
    mapping = {}
    for task in units.task.unique():
        mine = sorted(c for c in set(units.context_id) if f"/{task}/" in c)
        other = sorted(c for c in halves.search if f"/{task}/" in c)
        mapping.update(zip(mine, other[: len(mine)], strict=True))
    return units.assign(context_id=units.context_id.map(mapping))


def _chosen_moved(shortlist: pd.DataFrame) -> pd.DataFrame:
    """r7's wrong shortlist: ``chosen`` moved to another child (tied at the top where one is), in every seed."""
    moved = shortlist.copy()
    for _, rows in shortlist.groupby("random_seed"):
        others = rows[~rows.chosen].sort_values("selection_fitness", ascending=False, kind="stable")
        moved.loc[rows.index, "chosen"] = rows.index == others.index[0]
    return moved


@pytest.mark.parametrize("board", BOARDS)
def test_wrong_committed_files_are_caught(board):
    shortlist, units = _committed(board)
    assert half_problems(_search_half_ids(units, board), board)  # means unchanged: units_disagree alone passed it
    assert selection.units_disagree(shortlist, _search_half_ids(units, board)) == []
    assert half_problems(units[units.task != "qa_1"], board)  # a task dropped
    assert len(choice_problems(_chosen_moved(shortlist), board)) == 2 * shortlist.random_seed.nunique()


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("random_seed", [0, 1, 2, 3, 4])
def test_the_committed_programs_are_the_ledgers_entries(random_seed, board):
    """The chosen child's code: its digest is the child id's, and converted as submit-search converted it at the
    time (the program file named ``search-<seed>.program.py`` after notebook 08's folder ``search-<seed>``: the
    name is method.py's first line) it is the method.py whose SHA-256 the ledger's entry records."""
    entry = _entries(board)[random_seed]
    code = (Committed(board).programs / f"seed{random_seed}.py").read_text()
    assert candidate_name(code) == entry["origin"]["child_id"].rsplit("-", 1)[0]
    # both rounds ran since the child's file is named by its id (``converted_method``, as claims recompute)
    assert hashlib.sha256(converted_method(code, entry["origin"]["child_id"])).hexdigest() == entry["code_sha256"]


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
    run = _run(tmp_path / "run", random_seed=5)  # the search run of test_search_preregister
    picked = selection.select(run, _Fitness({"a": [0.2, 0.4, 0.1], "c": [0.9, 0.7, 0.6], "b": [0.0, 0.0, 0.0]}),
                              top_k=2)
    written = pd.read_csv(run / selection.SELECTED / selection.UNITS_FILE, dtype={"child_id": str})
    assert list(written.columns) == selection.UNIT_COLUMNS and set(written.child_id) == {"a", "c"}  # the top 2
    assert (written.random_seed == 5).all() and len(written) == 6  # three contexts each, no baseline row
    shortlist = pd.read_csv(run / selection.SELECTED / "shortlist.csv", dtype={"child_id": str}).assign(random_seed=5)
    assert selection.units_disagree(shortlist, written) == [] and picked.child_id == "c"
    assert selection.unit_means(written)[(5, "c")] == pytest.approx((0.8 + 0.6) / 2)  # task means, then their mean
    info = json.loads((run / selection.SELECTED / "selected.json").read_text())  # the files' digests, as written
    for key, name in [("shortlist_sha256", "shortlist.csv"), ("selection_units_sha256", selection.UNITS_FILE)]:
        assert info[key] == hashlib.sha256((run / selection.SELECTED / name).read_bytes()).hexdigest()

