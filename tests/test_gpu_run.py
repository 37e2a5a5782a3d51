"""What the GPU check's summary brings back for issue 51's steps: the rehearsal's record and the executed notebooks
within the device tool's 8 files. The steps themselves run at their CPU scale in tests/test_gpu_sim.py (throughput,
notebooks) and tests/test_gpu_rehearsal.py (the rehearsal)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"


@pytest.fixture()
def summary_module(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    for name in ("gpu_check", "gpu_summary"):
        sys.modules.pop(name, None)
    return importlib.import_module("gpu_summary")


def test_the_summary_brings_back_the_rehearsal_and_the_notebooks_within_8_files(tmp_path, summary_module):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    for name in summary_module.CSVS:
        (work / name).write_text("a\n1\n")
    (work / "paper_cost.json").write_text("{}")
    (work / "notebooks.tar.gz").write_bytes(b"x")
    (work / "steps.txt").write_text("env rc=0\nthroughput rc=0\nrehearsal rc=124\n")
    (work / "throughput.json").write_text(json.dumps({"verdict": "pass", "headline": "16.2x, 0 differing"}))
    assert summary_module.summarise(work, out) == 1  # the rehearsal timed out without a record
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 and {"paper_cost.json", "notebooks.tar.gz", "summary.json", "logs.tar.gz"} <= set(names)
    steps = json.loads((out / "summary.json").read_text())["steps"]
    assert steps["rehearsal"]["verdict"].startswith("fail: timed out") and steps["throughput"]["verdict"] == "pass"
    assert steps["notebooks"]["verdict"] == "not run"
