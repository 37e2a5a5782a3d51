"""The baselines' rows kept (arena.row_cache): dev rows on disk, reused while the board, items, model and code are
the same and recomputed when any of them changes; test rows in the process's memory only (never a file), shared
between two arenas of one process (notebook 07's second, for the post's methods), each ledger still recording
every look; a submission's rows never kept."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from cachecraft_lib.arena import arena as arena_module
from cachecraft_lib.arena import row_cache
from cachecraft_lib.arena.arena import Arena

SECRET = hashlib.sha256(b"cachecraft tests: row cache").hexdigest().encode()
OTHER = hashlib.sha256(b"cachecraft tests: row cache, another round").hexdigest().encode()


def _small(arena: Arena) -> Arena:
    """Smoke board A with two tasks, one item per task, one budget, one baseline: seconds per run."""
    board = arena.boards["A"]
    arena.boards["A"] = replace(board, budgets=(0.5,), items={"dev": 1, "test": 1}, baselines=("snapkv", "no_press"),
                                tasks=("niah_single_1", "vt"))
    return arena


class CountingArena(Arena):
    """An arena that counts its model runs."""

    runs: int = 0

    def run(self, board, items, contenders):  # noqa: ANN001, ANN201 - Arena.run's signature
        self.runs += 1
        return super().run(board, items, contenders)


@pytest.fixture(autouse=True)
def _no_rows_from_another_test():
    row_cache._IN_MEMORY.clear()
    yield
    row_cache._IN_MEMORY.clear()


def _arena(root: Path, rows_root: Path | None = None) -> CountingArena:
    return _small(CountingArena("smoke", root, progress=False, rows_root=rows_root))


def test_dev_rows_are_kept_and_reused(tmp_path):
    first = _arena(tmp_path / "a")
    rows = first.dev_baselines(first.boards["A"])
    assert first.runs == 1 and len(list((tmp_path / "a" / "dev" / "A").glob("baselines-*.parquet"))) == 1
    again = _arena(tmp_path / "a")  # a new process, the same folder
    pd.testing.assert_frame_equal(again.dev_baselines(again.boards["A"]), rows)
    assert again.runs == 0


def test_a_change_to_the_code_the_model_or_the_board_recomputes(tmp_path, monkeypatch):
    arena = _arena(tmp_path)
    rows = arena.dev_baselines(arena.boards["A"])
    monkeypatch.setattr(arena_module, "code_fingerprint", lambda: "another version of the library")
    pd.testing.assert_frame_equal(arena.dev_baselines(arena.boards["A"]), rows)
    assert arena.runs == 2  # the code changed: run again, not read back
    monkeypatch.setattr(arena_module, "model_fingerprint", lambda *spec: "retrained weights")
    arena.dev_baselines(arena.boards["A"])
    assert arena.runs == 3
    arena.boards["A"] = replace(arena.boards["A"], budgets=(0.4,))
    arena.dev_baselines(arena.boards["A"])
    assert arena.runs == 4
    assert len(list((tmp_path / "dev" / "A").glob("baselines-*.parquet"))) == 4


def test_the_code_fingerprint_covers_every_library_file(tmp_path, monkeypatch):
    library = tmp_path / "lib"
    shutil.copytree(row_cache.LIBRARY, library, ignore=shutil.ignore_patterns("__pycache__", "*.npz", "*.safetensors"))
    monkeypatch.setattr(row_cache, "LIBRARY", library)
    row_cache.code_fingerprint.cache_clear()
    try:
        before = row_cache.code_fingerprint()
        seen = {before}
        for edited in ("methods/registry.py", "arena/boards/smoke.yaml"):  # a module the rows pass through, a board
            path = library / edited
            path.write_text(path.read_text() + "\n# an edit\n")
            row_cache.code_fingerprint.cache_clear()
            seen.add(row_cache.code_fingerprint())
        assert len(seen) == 3
    finally:
        row_cache.code_fingerprint.cache_clear()


def test_the_model_fingerprint_reads_the_weights(tmp_path, monkeypatch):
    from cachecraft_lib.models import names

    folder = tmp_path / "model"
    shutil.copytree(names.TINY_DIR, folder)
    monkeypatch.setitem(names.ALIASES, "copy", folder)
    before = row_cache.model_fingerprint("copy", "cpu", "float32")
    weights = next(folder.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of the last tensor
    weights.write_bytes(bytes(data))
    row_cache.model_fingerprint.cache_clear()
    assert row_cache.model_fingerprint("copy", "cpu", "float32") != before
    assert row_cache.model_fingerprint("copy", "cpu", "bfloat16") != row_cache.model_fingerprint("copy", "cpu",
                                                                                                  "float32")


def test_two_arenas_share_test_rows_in_memory_and_each_ledger_records_every_look(tmp_path):
    shared = tmp_path / "rows"
    first = _arena(tmp_path / "first", shared)
    first.record_baselines("A", SECRET)
    second = _arena(tmp_path / "second", shared)
    second.record_baselines("A", SECRET)
    assert (first.runs, second.runs) == (1, 0)  # the second arena read the rows the first kept
    kept = [p for p in tmp_path.rglob("*") if p.is_file() and "rows" in p.parts]
    assert kept == []  # the hidden items' rows (their answers) are never written to disk

    def recorded(arena: Arena, kind: str) -> list[dict]:
        return [{k: v for k, v in e["payload"].items() if k not in ("time", "paired")}
                for e in arena.ledger.events() if e["kind"] == kind]

    assert recorded(second, "test_look") == recorded(first, "test_look") != []  # a kept row is still a look
    assert recorded(second, "baseline") == recorded(first, "baseline") != []
    for name in ("baseline-snapkv", "baseline-no_press"):
        mine, theirs = (pd.read_parquet(a.root / "private" / "round1" / "A" / f"{name}.parquet") for a in (first, second))
        pd.testing.assert_frame_equal(mine, theirs)


def test_nothing_on_disk_names_a_test_split(tmp_path):
    arena = _arena(tmp_path)
    arena.dev_baselines(arena.boards["A"])
    dev_files = sorted(tmp_path.rglob("baselines-*"))
    arena.record_baselines("A", SECRET)
    assert sorted(tmp_path.rglob("baselines-*")) == dev_files  # the round added no kept file
    with pytest.raises(ValueError):
        arena.rows.path(row_cache.RowKey("A", "test", "", "", (), "", ""))


def test_another_round_draws_other_items_and_runs_again(tmp_path):
    arena = _arena(tmp_path)
    arena.record_baselines("A", SECRET)
    other = _arena(tmp_path / "other", tmp_path)
    other.record_baselines("A", OTHER)  # another secret: other test items
    assert other.runs == 1


def test_a_file_that_no_longer_reads_is_recomputed(tmp_path):
    arena = _arena(tmp_path)
    rows = arena.dev_baselines(arena.boards["A"])
    kept = next((tmp_path / "dev" / "A").glob("baselines-*.parquet"))
    kept.write_bytes(b"not parquet")
    pd.testing.assert_frame_equal(arena.dev_baselines(arena.boards["A"]), rows)
    assert arena.runs == 2 and pd.read_parquet(kept).equals(rows)


@pytest.mark.parametrize("kind,name", [("submission", "someone"), ("baseline", "not-a-baseline-of-the-board"),
                                       ("submission", "snapkv")])
def test_only_the_boards_own_baselines_are_kept(tmp_path, kind, name):
    from cachecraft_lib.arena.board_runner import baseline_contender

    arena = _arena(tmp_path)
    contender = replace(baseline_contender("snapkv"), kind=kind, name=name)
    for _ in range(2):
        arena.run_test(arena.boards["A"], arena.ensure_round(SECRET), 1, [contender], [])
        arena._kept_rows(arena.boards["A"], "dev", arena.items(arena.boards["A"], "dev"), [contender])
    assert arena.runs == 4 and not row_cache._IN_MEMORY and not list(tmp_path.rglob("baselines-*"))
