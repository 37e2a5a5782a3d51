"""The GPU check end to end in a stand-in for the GPU machine, on a CPU: a clean virtual environment holding
only packages the machine's image has (scripts/gpu_sim_venv.sh), the carried wheels installed offline by the
check's own install step, then every step. A wheel missing from scripts/gpu_wheels.txt, or an import the
machine cannot satisfy, fails here instead of on the GPU. Without CUDA each step runs at its CPU scale and says
so. The first run downloads the wheels and builds the environment (cached under gpu_wheels/ and build/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def _run(cmd: list[str], env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def stand_in() -> tuple[Path, Path]:
    """(python of the stand-in environment, the wheels for its Python version)."""
    _run(["bash", "scripts/gpu_wheels.sh", "gpu_wheels"], {"PYTHON": sys.executable}, 1200)  # the carried set
    wheels = REPO / "gpu_wheels"
    if VERSION != "3.12":  # the same list for this Python; the version-independent wheels are copied
        wheels = REPO / "build" / f"gpu-sim-wheels-py{VERSION}"
        _run(["bash", "scripts/gpu_wheels.sh", str(wheels)], {"PYTHON": sys.executable, "GPU_WHEELS_PYVER": VERSION,
                                                              "GPU_WHEELS_SEED": str(REPO / "gpu_wheels")}, 1200)
    venv = REPO / "build" / f"gpu-sim-py{VERSION}"
    base = getattr(sys, "_base_executable", sys.executable)
    _run(["bash", "scripts/gpu_sim_venv.sh", str(venv)], {"SIM_PYTHON": base}, 1800)
    return venv / "bin" / "python", wheels


def test_the_check_runs_end_to_end_in_a_clean_stand_in_for_the_gpu_machine(stand_in, tmp_path):
    python, wheels = stand_in
    out = tmp_path / "out"
    env = {"PYTHON": str(python), "GPU_WHEELS": str(wheels), "GPU_CHECK_SITE": str(tmp_path / "site"),
           "GPU_CHECK_TIME_SCALE": "8", "BUDGET_S": "3000", "TMPDIR": str(tmp_path), "PYTHONPATH": "",
           # the rehearsal's CPU path is tests/test_gpu_rehearsal.py's; notebook 00 checks papermill and its kernel
           "STEPS": "throughput notebooks embedded eightb search train", "GPU_CHECK_NOTEBOOKS": "00"}
    start = time.monotonic()
    done = subprocess.run(["bash", "scripts/gpu_check.sh", str(out)], cwd=REPO, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=3300)
    seconds = time.monotonic() - start
    summary = json.loads((out / "summary.json").read_text())
    steps = summary["steps"]
    report = json.dumps({k: v["verdict"] for k, v in steps.items()}, indent=1)
    assert done.returncode == 0, f"{report}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    env_record = steps["env"]
    assert env_record["verdict"] == "pass" and env_record["versions"]["transformers"] == "5.2.0"
    assert set(env_record["origins"].values()) == {"carried"}  # the pins came from the wheels, not the image
    assert env_record["device"]["cuda"] is False and summary["scale"] == "cpu"
    for name in ("throughput", "notebooks", "embedded", "eightb", "search", "train"):  # no CUDA: CPU scale, said so
        assert steps[name]["verdict"].startswith("cpu scale (no CUDA)"), (name, steps[name]["verdict"])
    assert steps["embedded"]["agreement"]["float32"]["batched_eq_pipeline"].split("/")[0] == \
        steps["embedded"]["agreement"]["float32"]["batched_eq_pipeline"].split("/")[1]
    assert steps["eightb"]["decode"]["rows"] == 31 and steps["eightb"]["size"]["repeats"] >= 10
    assert steps["search"]["start_methods"] == ["spawn"] and steps["search"]["worker_failures"] == 0
    assert steps["throughput"]["differ"] == 0 and steps["notebooks"]["ok"] == ["00_ruler_benchmark"]
    files = list(out.iterdir())
    assert len(files) <= 8 and all(f.is_file() and f.stat().st_size <= 16 * 2**20 for f in files)
    assert not list(out.rglob("*.pt*"))  # no optimiser state, no weights
    printed = done.stdout[done.stdout.index("GPU check "):]
    assert len(printed) < 3000, printed
    print(f"stand-in run: {seconds:.0f}s\n{printed}")
