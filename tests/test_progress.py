"""A headless notebook run shows its progress: each cell as it starts (k of n) with the elapsed time, the
library's progress bars from inside the kernel, a line while a long cell is quiet, no kernel warnings, and
``cachecraft reproduce`` writes its own per-notebook timings."""

from __future__ import annotations

import io
import re
from pathlib import Path

import nbformat
import pytest

from cachecraft_lib.report import run_timings
from cachecraft_lib.report.notebook_progress import Progress, clock

LOOP = """import time
import cachecraft_lib.util.progress as progress
progress.HEADLESS_DELAY, progress.HEADLESS_INTERVAL = 0, 0.05
for i in progress.tqdm(range(6), desc="long loop", disable=True):  # a notebook's widgets off: the log still shows it
    time.sleep(0.2)"""


def _notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "cachecraft", "display_name": "Python (cachecraft .venv)",
                                 "language": "python"}
    params = nbformat.v4.new_code_cell('PROFILE = "smoke"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# a tiny notebook"), params, nbformat.v4.new_code_cell(LOOP),
                nbformat.v4.new_code_cell("time.sleep(2.6)  # quiet and long"),
                nbformat.v4.new_code_cell("from cachecraft_lib.report.notebooks import record\nrecord(done=True)")]
    path = folder / "00_tiny.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_progress_lines_split_tqdm_refreshes_and_say_how_long():
    out = io.StringIO()
    progress = Progress("nb", out)
    progress.write("bar:  50%|##   | 1/2 [00:01<00:01]\rbar: 100%|#####| 2/2 [00:02<00:00]\rbar: 100%|#####| 2/2 "
                   "[00:02<00:00]\n\x1b[A\nwarning: x\n")
    assert out.getvalue().splitlines() == ["    [nb] bar:  50%|##   | 1/2 [00:01<00:01]",
                                           "    [nb] bar: 100%|#####| 2/2 [00:02<00:00]", "    [nb] warning: x"]
    assert (clock(42), clock(75), clock(3725)) == ("42s", "1m15s", "1h02m")


def test_a_headless_run_shows_cells_bars_and_a_heartbeat(tmp_path, capfd, monkeypatch):
    from cachecraft_lib.cli import main

    book = _notebook(tmp_path)
    monkeypatch.setattr("cachecraft_lib.report.notebooks.list_notebooks", lambda only=None: [book])
    monkeypatch.setattr("cachecraft_lib.report.notebook_progress.HEARTBEAT", 1.0)
    monkeypatch.setattr(run_timings, "timings_path", lambda profile: tmp_path / "runs" / profile / "timings.csv")
    doc = tmp_path / "timings.md"
    doc.write_text("# timings\n<!-- timings:smoke:begin -->\nold\n<!-- timings:smoke:end -->\nafter\n")
    monkeypatch.setattr(run_timings, "DOC", doc)
    assert main(["reproduce", "--profile", "smoke", "--out", str(tmp_path / "out"),
                 "--figures", str(tmp_path / "f")]) == 0
    captured = capfd.readouterr()
    out = captured.out
    cells = re.findall(r"\[00_tiny\] cell (\d)/(\d): (.*?)  \(notebook at (\d+)s\)", out)
    assert [(k, n) for k, n, _, _ in cells] == [("1", "5"), ("2", "5"), ("3", "5"), ("4", "5"), ("5", "5")]
    assert cells[1][2] == "(the injected parameters)" and cells[3][2].startswith("time.sleep(2.6)")
    assert int(cells[-1][3]) >= 3  # elapsed time grows: the loop and the sleep took over 3 s
    bars = re.findall(r"\[00_tiny\] long loop: +\d+%\|.*?\| (\d)/6 \[", out)
    assert bars and bars[-1] == "6" and len(bars) >= 3  # several refreshes reached us, the last one complete
    assert re.search(r"cell 4/5 still running \(\d+s in this cell", out)
    assert "[1/1] running 00_tiny.ipynb" in out and "done    00_tiny.ipynb in" in out
    everything = captured.out + captured.err
    assert "without encryption" not in everything and "KeyboardInterrupt" not in everything
    rows = run_timings.latest(tmp_path / "runs" / "smoke" / "timings.csv")
    assert [(r["notebook"], r["status"]) for r in rows] == [("00_tiny", "ok")] and float(rows[0]["seconds"]) > 3
    text = doc.read_text()
    assert "old" not in text and "| 00_tiny |" in text and text.endswith("<!-- timings:smoke:end -->\nafter\n")


def test_a_quiet_run_prints_nothing_and_still_records(tmp_path, capfd):
    from cachecraft_lib.report.notebooks import read_records, run_notebook

    run = run_notebook(_notebook(tmp_path), "smoke", out_dir=tmp_path / "out", figures=tmp_path / "f")
    assert run.records == {"done": True} == read_records(run.executed)
    captured = capfd.readouterr()
    assert "[00_tiny]" not in captured.out and "KeyboardInterrupt" not in captured.err


def test_a_run_given_parameters_is_a_row_of_its_own():
    assert run_timings.run_name("08_search", {}) == "08_search"
    assert run_timings.run_name("08_search", {"ROUND": "replay", "BOARD": "B_offline"}) == \
        "08_search BOARD=B_offline ROUND=replay"


def test_timings_table_keeps_the_latest_run_per_notebook(tmp_path):
    path = tmp_path / "timings.csv"
    for name, seconds, status in (("03_grid", 100, "failed"), ("00_a", 5, "ok"), ("03_grid", 90, "ok")):
        run_timings.append(path, "cpu", name, seconds, status, 0.5, "abc1234")
    table = run_timings.timings_table(path)
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == ["00_a", "03_grid", "**all that ran**"]
    assert "| 90 | ok |" in table and "**95**" in table
    assert not run_timings.update_doc("cpu", path, tmp_path / "no-markers.md")


def test_a_rerun_of_some_notebooks_keeps_the_doc_rows_of_the_others(tmp_path):
    """A fresh clone reruns only the stale notebooks and has no runs/ of its own: the committed rows of the others
    (with their notes) stay, the rerun ones are replaced, and the total adds both; a failed kept row is not added."""
    doc = tmp_path / "timings.md"
    old = ("<!-- timings:cpu:begin -->\n| notebook | seconds | status | when (UTC) | commit | cores | load |\n"
           "|---|---|---|---|---|---|---|\n| 00_a | 1,200 | ok | t | c | 2 | 1 / 1 (beside a VM) |\n"
           "| 01_b | 7 | failed | t | c | 2 | 1 / 1 |\n| 03_grid | 500 | ok | t | c | 2 | 1 / 1 |\n"
           "| **all that ran** | **1,700** | | | | | |\n<!-- timings:cpu:end -->\n")
    doc.write_text(old)
    path = tmp_path / "timings.csv"
    run_timings.append(path, "cpu", "03_grid", 90, "ok", 0.5, "abc1234")
    assert run_timings.update_doc("cpu", path, doc)
    text = doc.read_text()
    assert "| 00_a | 1,200 | ok | t | c | 2 | 1 / 1 (beside a VM) |" in text and "| 01_b | 7 | failed |" in text
    assert "| 03_grid | 90 | ok |" in text and "| 03_grid | 500 |" not in text and "**1,290**" in text
    assert run_timings.update_doc("cpu", path, doc) and doc.read_text() == text  # written twice: the same


@pytest.mark.parametrize("on", ["1", ""])
def test_library_bars_are_text_only_when_headless(monkeypatch, on):
    from cachecraft_lib.util import progress

    monkeypatch.setenv(progress.HEADLESS_ENV, on)
    bar = progress.tqdm(total=3, disable=True)
    assert bar.disable is (not on)
    bar.close()


def test_the_commit_label_ignores_the_outputs_a_run_rewrites(tmp_path, monkeypatch):
    """A run rewrites figures/, docs/timings.md and dvc.lock as it goes: those are not changes to what ran, and
    must not mark later notebooks' rows ``+changes``; a changed source file must."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    for name in ("figures/a.png", "docs/timings.md", "dvc.lock", "code.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("1")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    monkeypatch.setattr(run_timings, "REPO", tmp_path)
    for name in ("figures/a.png", "docs/timings.md", "dvc.lock"):
        (tmp_path / name).write_text("2")
    assert not run_timings.commit().endswith("+changes")
    (tmp_path / "code.py").write_text("2")
    assert run_timings.commit().endswith("+changes")


def test_reproduce_records_a_run_given_parameters_under_its_own_name(tmp_path, monkeypatch):
    """`cachecraft reproduce --set ...` writes its timings row under the notebook's name and its parameters (the
    notebook itself is not run here: the suite's wiring is what is checked)."""
    from types import SimpleNamespace

    from cachecraft_lib.cli import main

    book = tmp_path / "08_search.ipynb"
    seen = {}

    def fake_run(path, profile, **kwargs):
        seen.update(kwargs["parameters"])
        return SimpleNamespace(seconds=12.5, executed=tmp_path / "out" / path.name)

    monkeypatch.setattr("cachecraft_lib.report.notebooks.list_notebooks", lambda only=None: [book])
    monkeypatch.setattr("cachecraft_lib.report.notebooks.run_notebook", fake_run)
    monkeypatch.setattr(run_timings, "timings_path", lambda profile: tmp_path / "runs" / profile / "timings.csv")
    monkeypatch.setattr(run_timings, "update_doc", lambda profile: False)
    assert main(["reproduce", "--profile", "smoke", "--set", "ROUND=replay", "--set", "BOARD=B_offline"]) == 0
    assert seen == {"ROUND": "replay", "BOARD": "B_offline"}
    rows = run_timings.latest(tmp_path / "runs" / "smoke" / "timings.csv")
    assert [(r["notebook"], r["seconds"]) for r in rows] == [("08_search BOARD=B_offline ROUND=replay", "12.5")]
