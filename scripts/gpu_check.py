"""The Python steps of ``scripts/gpu_check.sh``, one module each (``scripts/gpu_<step>.py``).

    python3 scripts/gpu_check.py STEP --work DIR      STEP: one of STEPS, or summary
    python3 scripts/gpu_check.py summary --work DIR --out OUT

Each step writes ``DIR/<step>.json``: its ``verdict`` (``pass``, ``fail: ...``, ``cpu scale: ...`` where CUDA is
absent and only the code path could be checked), a one-line ``headline`` and what it measured. A step that
raises still writes its record (the verdict says why) and exits 1; ``summary`` gathers every record, the
step exit codes (``steps.txt``), the CSVs and the logs into OUT (at most 8 files) and prints a short summary.
On a machine without CUDA every step runs at a CPU scale: the same code, small sizes, no GPU figures.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

STEPS = ("env", "throughput", "rehearsal", "notebooks", "embedded", "eightb", "search", "train")
HERE = Path(__file__).resolve().parent


def scale() -> str:
    """``gpu`` where torch sees a CUDA device (the sizes the check is meant for), else ``cpu``."""
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def write_record(work: Path, step: str, record: dict) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{step}.json"
    path.write_text(json.dumps(record, indent=1, default=str))
    return path


def run_step(step: str, work: Path) -> int:
    """Run one step's ``run(work, scale)`` and write its record, also when it raises."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    start = time.time()
    work.mkdir(parents=True, exist_ok=True)
    try:
        module = importlib.import_module(f"gpu_{step}")
        record = module.run(work, scale())
    except Exception as err:  # the record says why; the shell script goes on to the next step
        traceback.print_exc()
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        last = lines[-1] if lines else ""  # a subprocess's traceback ends with its error
        record = {"verdict": f"fail: {type(err).__name__}: {last[:300]}", "headline": ""}
    record["seconds"] = round(time.time() - start, 1)
    write_record(work, step, record)
    print(f"{step}: {record['verdict']} {record.get('headline', '')}", flush=True)
    return 0 if not record["verdict"].startswith("fail") else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=(*STEPS, "summary"))
    parser.add_argument("--work", required=True, help="folder for the steps' records and logs")
    parser.add_argument("--out", help="summary: the folder that comes back (at most 8 files)")
    args = parser.parse_args(argv)
    if args.step == "summary":
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        from gpu_summary import summarise

        return summarise(Path(args.work), Path(args.out or args.work))
    return run_step(args.step, Path(args.work))


if __name__ == "__main__":
    raise SystemExit(main())
