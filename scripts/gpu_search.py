"""Step ``search`` (c): a 2-iteration offline search with the embedded model on CUDA (bfloat16): the workers
must be spawned (a forked worker cannot use CUDA), every evaluation succeed, and each process's peak memory is
read in that process (``worker_memory.jsonl``): the workers hold the model, not the driver."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ITERATIONS = 2


def run(work: Path, scale: str) -> dict:
    from cachecraft_lib.profiles import get_profile
    from cachecraft_lib.sandbox import boundary
    from cachecraft_lib.search import health, memory
    from cachecraft_lib.search.evolve import evolve

    # The GPU machine's image may lack bubblewrap/libseccomp: this step checks the CUDA path of the search, not
    # the sandbox, so it runs the candidates with the boundary it has and records which (the summary says so).
    if boundary.missing_parts():
        os.environ[boundary.WEAK_ENV] = "1"  # inherited by the spawned workers
    sandbox = boundary.plan(allow_weak=True).name

    device, dtype = ("cuda", "bfloat16") if scale == "gpu" else ("cpu", "float32")
    out = work / "search"
    start = time.time()
    small = {} if scale == "gpu" else {"tasks": ("niah_single_1",), "lengths": (512,)}  # CPU: the code path
    evolve("v5", ITERATIONS, out, get_profile("smoke", device=device, dtype=dtype, **small), mutator="offline",
           resume=False)
    entries = health.read(out)
    workers = [e for e in entries if e["worker"]]
    peaks = memory.peaks(out)
    settings = json.loads((out / "search_config.json").read_text())
    worker_peaks = [p for p in peaks if p["worker"]]
    record = {"iterations": ITERATIONS, "seconds_search": round(time.time() - start, 1), "sandbox": sandbox,
              "device": settings["device"], "dtype": settings["dtype"], "evaluations": len(entries),
              "worker_evaluations": len(workers), "worker_failures": sum(not e["ok"] for e in workers),
              "errors": sorted({e["error"][:200] for e in entries if not e["ok"]}),
              "start_methods": sorted({str(e["start_method"]) for e in workers}), "memory": peaks,
              "worker_cuda_peak_gib": max((p["cuda_peak_gib"] for p in worker_peaks if p["cuda_peak_gib"] is not None),
                                          default=None),
              "worker_rss_peak_mib": max((p["rss_peak_mib"] for p in worker_peaks), default=None)}
    problems = []
    if not workers:
        problems.append("no evaluation ran in a worker")
    if record["worker_failures"]:
        problems.append(f"{record['worker_failures']} worker evaluations failed: {record['errors'][:1]}")
    if record["start_methods"] and record["start_methods"] != ["spawn"]:
        problems.append(f"workers started by {record['start_methods']}, not spawn")
    if scale == "gpu" and not record["worker_cuda_peak_gib"]:
        problems.append("no worker used CUDA")
    if problems:
        record["verdict"] = "fail: " + "; ".join(problems)
    else:
        record["verdict"] = "pass" if scale == "gpu" else "cpu scale (no CUDA): the search ran on the CPU"
    record["headline"] = (f"{len(workers)} worker evaluations, {record['worker_failures']} failed, start "
                          f"{record['start_methods']}, {record['dtype']} on {record['device']}, worker peak CUDA "
                          f"{record['worker_cuda_peak_gib']} GiB, RSS {record['worker_rss_peak_mib']} MiB")
    return record
