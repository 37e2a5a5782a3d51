"""Several seeds of the board search (search.board_seeds): on Ray, side by side, they write the very files the
serial runs write; seeds.csv names each run and its best dev fitness; the CLI takes --random-seeds and --ray."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from cachecraft_lib.search.board_seeds import board_searches, run_folder

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]
SIZE = dict(generations=1, population=2)
FILES = ("evolution_trace.jsonl", "generations.csv", "best/best_program.py", "run_info.txt")


def test_ray_runs_equal_the_serial_runs(tmp_path):
    pytest.importorskip("ray")
    root = tmp_path / "arena"  # dev baselines computed once, by the serial call, read by the Ray workers
    serial = board_searches("A", "v1", [3, 4], out_dir=tmp_path / "serial", profile="smoke", root=root,
                            progress=False, **SIZE)
    on_ray = board_searches("A", "v1", [3, 4], out_dir=tmp_path / "ray", profile="smoke", root=root, ray="local",
                            progress=False, **SIZE)
    assert list(on_ray.error) == ["", ""], on_ray
    assert list(serial.best) == list(on_ray.best)
    for s in (3, 4):
        for name in FILES:
            a = (run_folder(tmp_path / "serial", "A", "v1", s) / name).read_text()
            assert a == (run_folder(tmp_path / "ray", "A", "v1", s) / name).read_text(), (s, name)
    traces = [(run_folder(tmp_path / "serial", "A", "v1", s) / FILES[0]).read_text() for s in (3, 4)]
    assert traces[0] != traces[1]  # the seeds do differ
    written = pd.read_csv(tmp_path / "ray" / "seeds.csv")
    assert list(written.random_seed) == [3, 4] and written.best.notna().all()


def test_distinct_seeds_are_required(tmp_path):
    with pytest.raises(ValueError, match="distinct random seeds"):
        board_searches("A", "v1", [1, 1], out_dir=tmp_path, profile="smoke", root=tmp_path / "arena", **SIZE)


def test_cli_takes_random_seeds_and_ray():
    done = subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "arena", "search", "--help"],
                          capture_output=True, text=True, check=True)
    assert "--random-seeds" in done.stdout and "--ray" in done.stdout and "--cpus-per-task" in done.stdout
