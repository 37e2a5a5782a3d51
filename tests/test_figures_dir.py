"""The notebook decides where its figures go: figures/ only for the cpu profile, however it is started."""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest

from cachecraft_lib import paths
from cachecraft_lib.report import figures as report
from cachecraft_lib.report.notebooks import list_notebooks


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.delenv("CACHECRAFT_FIGURES_DIR", raising=False)
    monkeypatch.setattr(paths, "_profile", None)
    monkeypatch.setattr(paths, "RUNS", paths.REPO / "runs")


def test_a_smoke_run_never_writes_the_committed_figures(clean, tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    assert report.use_profile("smoke") == tmp_path / "runs" / "smoke" / "figures"
    written = report.save_table(pd.DataFrame({"a": [1.0]}), "table_probe", label="smoke")
    assert all(p.parent == tmp_path / "runs" / "smoke" / "figures" for p in written)
    assert not (paths.REPO / "figures" / "table_probe.csv").exists()
    assert report.use_profile("paper") == tmp_path / "runs" / "paper" / "figures"


def test_the_cpu_profile_writes_figures_and_an_explicit_folder_wins(clean, tmp_path, monkeypatch):
    assert report.use_profile("cpu") == paths.REPO / "figures"
    monkeypatch.setenv("CACHECRAFT_FIGURES_DIR", str(tmp_path / "mine"))
    assert paths.figures_dir() == tmp_path / "mine"
    report.use_profile("smoke")
    assert paths.figures_dir() == tmp_path / "mine"


@pytest.mark.parametrize("book", list_notebooks(), ids=lambda p: p.stem)
def test_every_notebook_declares_its_profile_before_it_saves(book):
    cells = [c.source for c in nbformat.read(str(book), as_version=4).cells if c.cell_type == "code"]
    declared = next(i for i, src in enumerate(cells) if "report.use_profile(PROFILE)" in src)
    saving = [i for i, src in enumerate(cells) if "save_table(" in src or "savefig(" in src or ".write(" in src]
    assert saving and declared <= min(saving)
