"""The prepared GPU check: the shell script parses and dry-runs on a CPU; its Python steps run on a CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

SCRIPTS = Path(__file__).parents[1] / "scripts"


def _steps():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPTS / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shell_script_parses_and_dry_runs_every_step_under_a_timeout(tmp_path):
    subprocess.run(["bash", "-n", str(SCRIPTS / "gpu_check.sh")], check=True)
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), str(tmp_path)], env={**os.environ, "DRY_RUN": "1"},
                          capture_output=True, text=True, check=True, cwd=SCRIPTS.parent)
    steps = (tmp_path / "steps.txt").read_text().splitlines()
    assert [s.split()[1] for s in steps] == ["env", "prefill", "latency", "train_tiny", "search"]
    limits = [int(s.split("timeout ")[1].split("s)")[0]) for s in steps]
    assert sum(limits) <= 600 and "results in" in done.stdout


def test_env_and_prefill_steps_on_cpu(tmp_path):
    steps = _steps()
    assert steps.main(["env", "--out", str(tmp_path), "--device", "cpu"]) == 0
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["torch"] and "matmul_fp32_precision" in env
    assert steps.main(["prefill", "--out", str(tmp_path), "--device", "cpu", "--model", "tiny", "--length", "256"]) == 0
    record = json.loads((tmp_path / "prefill.json").read_text())
    assert record["length"] == 256 and record["captured_gib"] > 0
    lengths = record["cache_lengths"]
    assert set(lengths) == set(steps.PRESSES) and all(len(v) == 4 for v in lengths.values())  # tiny: 4 layers
    for name, per_layer in lengths.items():  # head-wise presses keep the length and mask evicted keys per head
        assert (max(per_layer) == 256) == (name in ("adasnapkv", "expected_attention")), name
