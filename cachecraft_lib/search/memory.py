"""Peak memory of the processes that evaluate a search's candidates, read in those processes.

The search's workers are spawned processes with their own model and prefills: a peak read in the process that
drives the run says nothing about them. ``evaluator.py`` calls ``append_reading`` after each evaluation, in the process
that did it; ``peaks`` gives each process's latest (largest) reading.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import sys
from pathlib import Path

import torch

MEMORY_FILE = "worker_memory.jsonl"


def reading() -> dict:
    """This process's peaks so far: CUDA's allocator (None where CUDA was never used) and the resident set."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    rss_mib = rss / 2**20 if sys.platform == "darwin" else rss / 2**10
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return {"pid": os.getpid(), "worker": multiprocessing.parent_process() is not None,
            "cuda_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None,
            "cuda_reserved_peak_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3) if cuda else None,
            "rss_peak_mib": round(rss_mib, 1)}


def append_reading(run_dir: str | Path) -> None:
    """Append this process's reading to the run folder's memory file."""
    with open(Path(run_dir) / MEMORY_FILE, "a") as f:
        f.write(json.dumps(reading()) + "\n")


def peaks(run_dir: str | Path) -> list[dict]:
    """The last reading of each process (peaks only grow), workers and driver alike."""
    path = Path(run_dir) / MEMORY_FILE
    if not path.is_file():
        return []
    last: dict[int, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            last[entry["pid"]] = entry
    return list(last.values())
