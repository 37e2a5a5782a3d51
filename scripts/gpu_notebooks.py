"""Step ``notebooks``: every notebook (00-08) through ``cachecraft reproduce --profile gpu`` (papermill), its
per-notebook seconds from ``runs/gpu/timings.csv``; the executed notebooks and the figures (labelled "gpu profile,
embedded stand-in", with their per-sample data) packed into ``notebooks.tar.gz``. On a CPU the gpu profile's
stand-in (``CACHECRAFT_GPU_STANDIN=1``: the smoke sizes) runs ``GPU_CHECK_NOTEBOOKS`` (default 00 and 06)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU_NOTEBOOKS = "00 06"


def run(work: Path, scale: str) -> dict:
    runs, executed, figures = work / "runs", work / "executed", work / "figures"
    env = {**os.environ, "CACHECRAFT_RUNS_DIR": str(runs)}
    only = os.environ.get("GPU_CHECK_NOTEBOOKS", "" if scale == "gpu" else CPU_NOTEBOOKS).split()
    if scale != "gpu":
        env["CACHECRAFT_GPU_STANDIN"] = "1"
    cmd = [sys.executable, "-m", "cachecraft_lib.cli", "reproduce", "--profile", "gpu", "--quiet",
           "--out", str(executed), "--figures", str(figures), *(["--only", *only] if only else [])]
    limit = float(os.environ.get("GPU_CHECK_STEP_LIMIT", "0")) - 20  # pack what ran before the shell's timeout
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=limit if limit > 0 else None)
        code, log, err = done.returncode, done.stdout + done.stderr, done.stderr.strip()
    except subprocess.TimeoutExpired as stopped:
        log = (stopped.stdout or b"").decode() if isinstance(stopped.stdout, bytes) else (stopped.stdout or "")
        code, err = 124, f"stopped at the step's {limit:.0f}s: rerun with STEPS=notebooks (the grid resumes)"
    (work / "notebooks_run.log").write_text(log)
    timings = runs / "gpu" / "timings.csv"
    rows = list(csv.DictReader(timings.open())) if timings.is_file() else []
    with tarfile.open(work / "notebooks.tar.gz", "w:gz") as tar:
        for folder in (executed, figures):
            if folder.is_dir():
                tar.add(folder, arcname=folder.name)
        if timings.is_file():
            tar.add(timings, arcname="timings.csv")
    seconds = {r["notebook"]: float(r["seconds"]) for r in rows}
    ok = [r["notebook"] for r in rows if r["status"] == "ok"]
    headline = f"{len(ok)} notebook(s) ok in {sum(seconds.values()):.0f}s: " + ", ".join(
        f"{name[:2]} {s:.0f}s" for name, s in seconds.items())
    if code != 0:
        verdict = f"fail: reproduce exited {code}: {err.splitlines()[-1][:200] if err else ''}"
    else:
        verdict = "pass" if scale == "gpu" else f"cpu scale (no CUDA): the gpu stand-in, notebooks {' '.join(only)}"
    return {"verdict": verdict, "headline": headline, "seconds": seconds, "ok": ok}
