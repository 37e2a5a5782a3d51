"""The ``gpu`` profile and its CPU stand-in (``CACHECRAFT_GPU_STANDIN=1``): the sizes the issue asks for, the
label and figure folder, the arena boards with 4x the cpu profile's dev contexts, no profile allow-list that
leaves ``gpu`` out, and two notebooks run end to end through ``cachecraft reproduce --profile gpu`` on the CPU.

Running all nine notebooks again here would add about as much as the smoke notebook tests (tens of minutes), so
the stand-in's sizes are pinned to the smoke profile's (which the notebook tests run) and what differs by name
(boards, settings, figures, label) is checked directly. ``scripts/gpu_check.sh``'s notebooks step runs all nine
on a GPU (on a CPU: tests/test_gpu_sim.py, notebook 00)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachecraft_lib import paths
from cachecraft_lib.arena.boards.boards import load_boards
from cachecraft_lib.profiles import GPU_STANDIN_ENV, PROFILES, STANDIN_EXTRAS, STANDIN_SIZES, get_profile

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setenv(GPU_STANDIN_ENV, "1")


def test_the_gpu_profile_runs_the_embedded_model_on_cuda_at_sizes_the_cpu_profile_cannot(monkeypatch):
    monkeypatch.delenv(GPU_STANDIN_ENV, raising=False)
    gpu, cpu = get_profile("gpu"), PROFILES["cpu"]
    assert gpu.device == "cuda" and gpu.dtype == "float32" and gpu.embedded and gpu.ruler_source == "offline"
    assert gpu.samples_per_task >= 100 > cpu.samples_per_task
    assert (gpu.ratios, gpu.methods, gpu.lengths) == (cpu.ratios, cpu.methods, cpu.lengths)  # the same grid
    assert gpu.label == "gpu profile, embedded stand-in"
    assert paths.profile_figures_dir("gpu") == paths.RUNS / "gpu" / "figures"


def test_the_gpu_boards_have_four_times_the_cpu_dev_contexts_and_nothing_else_changed(monkeypatch):
    monkeypatch.delenv(GPU_STANDIN_ENV, raising=False)
    gpu, cpu = load_boards("gpu"), load_boards("cpu")
    assert list(gpu) == list(cpu)
    for name, board in gpu.items():
        assert board.profile == "gpu"
        assert board.items["dev"] == 4 * cpu[name].items["dev"] and board.items["test"] == cpu[name].items["test"]
        assert (board.budgets, board.tasks, board.lengths) == (cpu[name].budgets, cpu[name].tasks, cpu[name].lengths)


def test_the_standin_keeps_the_gpu_name_and_paths_at_the_smoke_sizes_on_the_cpu(standin):
    from cachecraft_lib.arena.arena import Arena

    gpu, smoke = get_profile("gpu"), PROFILES["smoke"]
    assert gpu.name == "gpu" and gpu.device == "cpu" and "stand-in" in gpu.label
    assert {"samples_per_task", "lengths", "methods", "search_iterations"} <= set(STANDIN_SIZES)
    assert {k: getattr(gpu, k) for k in STANDIN_SIZES} == {k: getattr(smoke, k) for k in STANDIN_SIZES}
    assert {k: gpu.extras[k] for k in STANDIN_EXTRAS} == {k: smoke.extras[k] for k in STANDIN_EXTRAS}
    assert gpu.dtype == PROFILES["gpu"].dtype and gpu.models == PROFILES["gpu"].models
    arena = Arena("gpu", root=None, progress=False)
    assert arena.settings is not None and arena.settings.device == "cpu"  # not the cpu defaults by accident
    assert {k: b.items for k, b in arena.boards.items()} == {k: b.items for k, b in load_boards("smoke").items()}


def _profile_tuples(source: str) -> list[tuple[str, ...]]:
    """Every tuple/list/set literal of strings, and every dict's keys, in ``source`` that name two or more
    profiles (a dict of sizes per profile without ``gpu`` raises KeyError under it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        elements = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(
            node, (ast.Tuple, ast.List, ast.Set)) else []
        names = tuple(e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str))
        if len(set(names) & set(PROFILES)) >= 2:
            found.append(names)
    return found


def test_no_library_module_or_notebook_lists_profiles_without_gpu():
    """A hard-coded list of profiles (the arena once had ``("smoke", "cpu", "paper")``) silently gives ``gpu`` the
    fallback path; ``sorted(PROFILES)`` or ``name in PROFILES`` is what code should use."""
    import nbformat

    sources = {p: p.read_text() for p in (REPO / "cachecraft_lib").rglob("*.py")
               if "examples" not in p.parts}  # the arena's example submissions run outside the library
    for book in sorted((REPO / "notebooks").glob("*.ipynb")):
        code = [c.source for c in nbformat.read(book, as_version=4).cells if c.cell_type == "code"]
        sources[book] = "\n".join(line for line in "\n".join(code).splitlines() if not line.lstrip().startswith(("%", "!")))
    offenders = {str(p.relative_to(REPO)): t for p, s in sources.items() for t in _profile_tuples(s) if "gpu" not in t}
    assert not offenders, offenders


def test_the_probe_finds_a_profile_list_without_gpu():
    assert _profile_tuples('x = "p" in ("smoke", "cpu", "paper")') == [("smoke", "cpu", "paper")]
    assert _profile_tuples('x = ("cpu",)') == []
    assert _profile_tuples('SIZES = {"smoke": 1, "cpu": 2, "paper": 3}') == [("smoke", "cpu", "paper")]


@pytest.mark.slow
def test_cachecraft_reproduce_runs_notebooks_00_and_06_under_the_gpu_standin(tmp_path):
    """The CLI end to end on the CPU: the executed notebooks record the gpu profile; figures carry its label."""
    env = {**os.environ, GPU_STANDIN_ENV: "1", "CACHECRAFT_RUNS_DIR": str(tmp_path / "runs")}
    done = subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "reproduce", "--profile", "gpu", "--quiet",
                           "--only", "00", "06", "--out", str(tmp_path / "nb"), "--figures", str(tmp_path / "f")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from cachecraft_lib.report.notebooks import read_records

    for book in ("00_ruler_benchmark", "06_latency"):
        assert read_records(tmp_path / "nb" / f"{book}.ipynb")["profile"] == "gpu"
    assert "gpu profile, embedded stand-in" in (tmp_path / "f" / "table_ruler_tasks.md").read_text()
    assert (tmp_path / "f" / "samples" / "06_latency.csv.gz").exists()
    rows = (tmp_path / "runs" / "gpu" / "timings.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",ok," in r for r in rows[1:])
