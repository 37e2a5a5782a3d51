"""The prepared GPU check's shell script and summary, on a CPU: every step under `timeout -k` within the budget,
the import gate, at most 8 files back, a short printed summary. (The whole check end to end in a clean
environment like the GPU machine's: tests/test_gpu_sim.py.)"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"
STEPS = ["env", "throughput", "rehearsal", "notebooks", "embedded", "eightb", "search", "train"]
DEFAULT = ["env", "throughput", "rehearsal", "notebooks"]  # the first check's steps only when asked for


@pytest.fixture()
def check_modules(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    for name in ("gpu_check", "gpu_summary", "gpu_env"):
        sys.modules.pop(name, None)
    return importlib.import_module("gpu_check"), importlib.import_module("gpu_summary")


def test_shell_script_parses_and_dry_runs_every_step_under_its_timeout(tmp_path):
    subprocess.run(["bash", "-n", str(SCRIPTS / "gpu_check.sh")], check=True)
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), str(tmp_path)], env={**os.environ, "DRY_RUN": "1"},
                          capture_output=True, text=True, check=True, cwd=SCRIPTS.parent)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == STEPS
    assert [line.split()[0] for line in lines if "dry-run" in line] == DEFAULT
    limits = [int(line.split("timeout ")[1].split("s)")[0]) for line in lines if "dry-run" in line]
    assert sum(limits) == 540 and all(limit >= 20 for limit in limits)  # 9 minutes: notebooks get what is left
    assert limits[-1] >= 300  # about 6 minutes for the nine notebooks
    text = (SCRIPTS / "gpu_check.sh").read_text()
    assert 'timeout -k "$KILL_AFTER"' in text and "python3" in text and "--no-index --no-deps" in text


def test_steps_runs_only_the_steps_named_and_env_always(tmp_path):
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "DRY_RUN": "1", "STEPS": "embedded"}, check=True, cwd=SCRIPTS.parent)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == STEPS
    ran = [line.split()[0] for line in lines if "dry-run" in line]
    assert ran == ["env", "embedded"], lines
    assert all("not asked for" in line for line in lines if line.split()[0] not in ran)


def _script_with_steps(tmp_path: Path, steps: str) -> Path:
    """gpu_check.sh with its budget and step() as they are and the given steps instead of the real ones."""
    text = (SCRIPTS / "gpu_check.sh").read_text()
    head = text[:text.index("summary() {")]
    script = tmp_path / "check.sh"
    script.write_text(head.replace('"$PY" "$REPO/scripts/gpu_check.py" "$name" --work "$WORK"', '"${CMD[@]}"')
                      + 'echo "$WORK" > "$OUT/work"\n' + steps)
    return script


def test_steps_stay_within_the_budget_and_timeout_kills_what_a_step_started(tmp_path):
    """Each step gets min(its timeout, what is left); under MIN_STEP_S left it is skipped; `timeout -k` ends the
    step's children too (a search's workers)."""
    pidfile = tmp_path / "child.pid"
    steps = (f'CMD=(bash -c "sleep 60 & echo \\$! > {pidfile}; wait"); step a 3\n'
             'CMD=(sleep 2); step b 3\nCMD=(sleep 100); step c 100\n')
    script = _script_with_steps(tmp_path, steps)
    start = time.monotonic()
    subprocess.run(["bash", str(script), str(tmp_path / "out")], check=True, capture_output=True,
                   env={**os.environ, "BUDGET_S": "7", "MIN_STEP_S": "3", "KILL_AFTER_S": "1", "STEPS": "a b c"},
                   cwd=SCRIPTS.parent)
    assert time.monotonic() - start < 12
    work = Path((tmp_path / "out" / "work").read_text().strip())
    codes = (work / "steps.txt").read_text().splitlines()
    assert codes[0] == "a rc=124" and codes[1] == "b rc=0" and codes[2].startswith("c skipped")
    child = int(pidfile.read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_summary_brings_back_at_most_8_files_and_says_why_a_step_has_no_record(tmp_path, check_modules):
    gpu_check, gpu_summary = check_modules
    work, out = tmp_path / "work", tmp_path / "out"
    gpu_check.write_record(work, "env", {"verdict": "pass", "headline": "python 3.12", "scale": "gpu",
                                         "device": {"name": "NVIDIA H200"}})
    gpu_check.write_record(work, "embedded", {"verdict": "pass", "headline": "x" * 5000})
    (work / "steps.txt").write_text("env rc=0\nembedded rc=0\neightb rc=124\nsearch rc=1\ntrain skipped (5s left)\n"
                                    "extra not asked for (STEPS=embedded)\n")
    for name in gpu_summary.CSVS:
        (work / name).write_text("a,b\n1,2\n")
    (work / "search").mkdir()
    (work / "search" / "run.log").write_text("log")
    (work / "search" / "weights.bin").write_bytes(b"0" * 10)  # not a log: left out
    assert gpu_summary.summarise(work, out) == 1  # a step failed
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and "summary.json" in files and "logs.tar.gz" in files
    summary = json.loads((out / "summary.json").read_text())
    steps = summary["steps"]
    assert steps["eightb"]["verdict"].startswith("fail: timed out") and steps["search"]["verdict"].startswith("fail")
    assert steps["train"]["verdict"].startswith("skipped") and summary["device"] == "NVIDIA H200"
    assert gpu_summary.step_verdict(work, "extra", "not asked for (STEPS=embedded)")["verdict"].startswith("not asked")
    assert len(gpu_summary.printed(summary)) < 3000
    import tarfile

    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert "search/run.log" in names and "search/weights.bin" not in names


def test_a_step_that_raises_still_writes_its_record(tmp_path, check_modules, monkeypatch):
    gpu_check, _ = check_modules
    (tmp_path / "gpu_boom.py").write_text("def run(work, scale):\n    raise RuntimeError('no CUDA here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gpu_check.run_step("boom", tmp_path / "work") == 1
    record = json.loads((tmp_path / "work" / "boom.json").read_text())
    assert record["verdict"] == "fail: RuntimeError: no CUDA here"


def test_env_step_fails_when_an_import_fails_or_a_pin_is_not_met(tmp_path, check_modules, monkeypatch):
    gpu_check, _ = check_modules
    gpu_env = importlib.import_module("gpu_env")
    monkeypatch.setattr(gpu_env, "IMPORTS", ("json", "no_such_module_here"))
    monkeypatch.setattr(gpu_env, "PINNED", {"torch": "0.0.1"})
    record = gpu_env.run(tmp_path, "cpu")
    assert record["verdict"].startswith("fail") and "no_such_module_here" in record["verdict"]
    assert "torch is" in record["verdict"]
    monkeypatch.setattr(gpu_env, "IMPORTS", ("json",))
    monkeypatch.setattr(gpu_env, "PINNED", {})
    assert gpu_env.run(tmp_path, "cpu")["verdict"] == "pass"


def test_latency_script_refuses_fewer_than_10_repeats():
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_latency.py"), "--repeats", "3", "--device", "cpu"],
                          capture_output=True, text=True, cwd=SCRIPTS.parent,
                          env={**os.environ, "PYTHONPATH": str(SCRIPTS.parent)})
    assert done.returncode == 2 and "at least 10" in done.stderr
