"""benchmarks/bench_reproduce.py: the working tree's side sees its uncommitted changes (and nothing ignored), and
the table's ratios and total are over the notebooks that ran on both sides."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from cachecraft_lib.paths import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("bench_reproduce", REPO / "benchmarks" / "bench_reproduce.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_after_side_is_head_with_the_working_trees_changes(tmp_path, monkeypatch):
    bench = _bench()
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    for name, text in {"kept.py": "a\n", "edited.py": "old\n", "gone.py": "x\n", ".gitignore": "cache/\n"}.items():
        (repo / name).write_text(text)
    run("add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (repo / "edited.py").write_text("new\n")
    (repo / "gone.py").unlink()
    (repo / "new.py").write_text("untracked\n")
    (repo / "cache").mkdir()
    (repo / "cache" / "result.bin").write_text("ignored\n")
    monkeypatch.setattr(bench, "REPO", repo)
    dest = bench.worktree("HEAD", tmp_path / "after")
    assert (dest / "gone.py").exists() and (dest / "edited.py").read_text() == "old\n"
    assert bench.overlay_working_tree(dest) == 3
    assert (dest / "edited.py").read_text() == "new\n" and (dest / "new.py").is_file()
    assert not (dest / "gone.py").exists() and not (dest / "cache").exists()
    assert (dest / "kept.py").read_text() == "a\n"


def test_the_table_compares_what_ran_on_both_sides():
    bench = _bench()
    before = bench.Side("before", "old", Path("."), {"00_a": 10.0, "01_b": 30.0, "02_c": 5.0},
                        {"00_a": "ok", "01_b": "ok", "02_c": "ok"}, {"00_a": (0.1, 1.9)})
    after = bench.Side("after", "new", Path("."), {"00_a": 4.0, "01_b": 16.0, "02_c": 1.0},
                       {"00_a": "ok", "01_b": "ok", "02_c": "failed (1; log)"})
    rows = {r["notebook"]: r for r in bench.table(before, after, ["00_a", "01_b", "02_c"])}
    assert rows["00_a"]["after/before"] == "0.40" and rows["00_a"]["load_before_run"] == "0.1 -> 1.9"
    assert rows["02_c"]["after/before"] == "" and "failed" in rows["02_c"]["status"]
    total = rows["total (2 on both sides)"]
    assert (total["before_s"], total["after_s"], total["after/before"]) == ("40.0", "20.0", "0.50")
    assert float(total["after/before"]) == pytest.approx(20 / 40)
