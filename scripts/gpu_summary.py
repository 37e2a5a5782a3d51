"""Step ``summary``: every step's record and exit code into ``summary.json``, the step CSVs beside it, all logs
in one ``logs.tar.gz``: at most 8 files in OUT (the device tool brings back 8). Prints a short summary, one
line per step with its verdict, under 3 kB."""

from __future__ import annotations

import json
import shutil
import tarfile
import time
from pathlib import Path

from gpu_check import STEPS

EXTRAS = ("paper_cost.json", "notebooks.tar.gz")  # the rehearsal's record, the executed notebooks and figures
CSVS = ("cells.csv", "cache_lengths.csv", "latency.csv", "latency_ratios.csv", "latency_samples.csv")
LOG_SUFFIXES = (".log", ".json", ".jsonl", ".csv", ".txt", ".md")
MAX_LOG_BYTES = 2 * 2**20  # per file in the tarball: the run folders hold no large file the summary needs
MAX_FILES, MAX_PRINT = 8, 3000


def exit_codes(work: Path) -> dict[str, str]:
    """``steps.txt`` lines ``name rc=N``, ``name skipped (...)`` or ``name not asked for (STEPS=...)``, by step."""
    path = work / "steps.txt"
    codes = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, _, rest = line.partition(" ")
        codes[name] = rest
    return codes


def step_verdict(work: Path, step: str, code: str | None) -> dict:
    path = work / f"{step}.json"
    if path.is_file():
        record = json.loads(path.read_text())
    elif code is None:
        record = {"verdict": "not run"}
    elif code.startswith(("skipped", "not asked")):
        record = {"verdict": code}
    elif code in ("rc=124", "rc=137"):
        record = {"verdict": f"fail: timed out ({code}); see logs.tar.gz {step}.log"}
    else:
        record = {"verdict": f"fail: exited {code} without a record; see logs.tar.gz {step}.log"}
    record["exit"] = code
    return record


def pack_logs(work: Path, out: Path) -> Path:
    tar_path = out / "logs.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in LOG_SUFFIXES and path.stat().st_size <= MAX_LOG_BYTES:
                tar.add(path, arcname=str(path.relative_to(work)))
    return tar_path


def printed(summary: dict) -> str:
    lines = [f"GPU check {summary['date']}: {summary['device']} ({summary['scale']} scale), {summary['seconds']}s"]
    for step, record in summary["steps"].items():
        line = f"- {step}: {record['verdict']}"
        if record.get("headline"):
            line += f" | {record['headline']}"
        lines.append(line[:560])
    lines.append(f"files: {', '.join(summary['files'])}")
    return "\n".join(lines)[:MAX_PRINT]


def summarise(work: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    codes = exit_codes(work)
    steps = {step: step_verdict(work, step, codes.get(step)) for step in STEPS}
    env = steps["env"]
    device = (env.get("device") or {}).get("name") or ("no CUDA" if env.get("device") else "unknown")
    files = [name for name in EXTRAS if (work / name).is_file()]
    for name in files:
        shutil.copyfile(work / name, out / name)
    for name in CSVS[: MAX_FILES - 2 - len(files)]:
        if (work / name).is_file():
            shutil.copyfile(work / name, out / name)
            files.append(name)
    files.append(pack_logs(work, out).name)
    started = float((work / "started").read_text()) if (work / "started").is_file() else time.time()
    summary = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": device, "scale": env.get("scale", "unknown"),
               "seconds": round(time.time() - started), "steps": steps, "files": ["summary.json", *files]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(printed(summary))
    return 0 if all(not r["verdict"].startswith("fail") for r in steps.values()) else 1
