"""Step ``throughput``: ``benchmarks/grid_throughput.py`` on the gpu profile: the grid's batched engine (rows of
many samples decoded together, sized by free memory) against KVPress's pipeline per cell, in float32, on the
same RULER rows; the speed-up (goal on a GPU: 15x) and the number of answers that differ (expected 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GOAL = 15.0
GPU = ["--slice", "full", "--length", "1024", "--samples", "4", "--pipeline-budget-s", "25", "--skip-serial"]
# on a CPU: the stand-in's sizes (the smoke profile's grid), one sample per task
CPU = ["--slice", "r088", "--length", "1024", "--samples", "1", "--pipeline-budget-s", "20", "--skip-serial"]
REPO = Path(__file__).resolve().parents[1]


def run(work: Path, scale: str) -> dict:
    out = work / "throughput.json"
    env = {**os.environ, **({} if scale == "gpu" else {"CACHECRAFT_GPU_STANDIN": "1"})}
    cmd = [sys.executable, str(REPO / "benchmarks" / "grid_throughput.py"), "--profile", "gpu",
           *(GPU if scale == "gpu" else CPU), "--json", str(out)]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    (work / "throughput_run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"grid_throughput.py exited {done.returncode}: {done.stderr.strip()[-300:]}")
    numbers = json.loads(out.read_text())
    headline = (f"{numbers['ratio']}x KVPress's pipeline ({numbers['cells']} cells x {numbers['samples']} samples, "
                f"{numbers['pipeline_answers']} pipeline answers), {numbers['differ']} differing answers")
    if scale != "gpu":
        verdict = "cpu scale (no CUDA): code path only"
    elif numbers["differ"]:
        verdict = f"fail: {numbers['differ']} answers differ from the pipeline in float32"
    else:
        verdict = "pass" if numbers["ratio"] >= GOAL else f"below goal: {numbers['ratio']}x < {GOAL}x"
    return {"verdict": verdict, "headline": headline, **numbers}
