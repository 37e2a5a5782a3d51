"""Step ``rehearsal``: ``scripts/rehearse_paper.py``: the paper profile's grid (one sample per task, offline RULER)
and prefill latency on Llama-3.1-8B- and Qwen3-8B-shaped models with random weights; the measured seconds per
sample and per cell in ``paper_cost.json`` (brought back; committed as docs/gpu_runs/paper_cost.json, which
``cachecraft grid --estimate`` reads). On a CPU a down-scaled shape at one length checks the code path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GPU = ["--latency-repeats", "5"]
CPU = ["--shape-scale", "0.02", "--lengths", "1024", "--tasks", "niah_single_1", "--max-new-tokens", "4",
       "--latency-repeats", "2"]
REPO = Path(__file__).resolve().parents[1]


def run(work: Path, scale: str) -> dict:
    out = work / "paper_cost.json"
    tokenizer = os.environ.get("GPU_CHECK_TOKENIZER")  # gpu_check.sh: SmolLM2's, carried beside the wheels
    cmd = [sys.executable, str(REPO / "scripts" / "rehearse_paper.py"), *(GPU if scale == "gpu" else CPU),
           "--out", str(out), *(["--tokenizer", tokenizer] if tokenizer else [])]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    (work / "rehearsal_run.log").write_text(done.stdout + done.stderr)
    if not out.is_file():
        raise RuntimeError(f"rehearse_paper.py exited {done.returncode} with no record: {done.stderr.strip()[-300:]}")
    sys.path.insert(0, str(REPO))
    from cachecraft_lib.grid.measured import gpu_hours, load_measured

    record = load_measured(out)
    hours = gpu_hours(record)
    headline = "; ".join(f"{h['model'].split('/')[-1]} {h['length']}: {h['s_per_sample']} s/sample, "
                         f"{h['s_per_cell']} s/cell" for h in hours)
    complete = done.returncode == 0
    verdict = ("pass" if complete else f"fail: exited {done.returncode} after {len(hours)} group(s)") \
        if scale == "gpu" else "cpu scale (no CUDA): code path only, shape scale 0.02"
    return {"verdict": verdict, "headline": headline, "groups": hours,
            "paper_gpu_hours": round(sum(h["gpu_hours"] for h in hours), 1), "latency": record.get("latency", [])}
