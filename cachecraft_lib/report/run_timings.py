"""Per-notebook timings written by ``cachecraft reproduce`` itself, never copied by hand.

Each notebook run appends one row to ``runs/<profile>/timings.csv`` (when, commit, profile, notebook, seconds,
status, CPU cores, load average before and after). ``timings_table`` turns the latest row per notebook into
Markdown, and ``update_doc`` writes it between the markers ``<!-- timings:<profile>:begin -->`` and
``<!-- timings:<profile>:end -->`` of ``docs/timings.md`` (a doc without them is left alone), so the doc says what
the last run of each notebook measured. Rows of notebooks this machine has not run (``runs/`` is not committed, so
a fresh clone that reruns only the stale notebooks has no row for the others) are kept as the doc had them.
"""

from __future__ import annotations

import csv
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..paths import REPO, RUNS

FIELDS = ["when", "commit", "profile", "notebook", "seconds", "status", "cpus", "load_before", "load_after"]
DOC = REPO / "docs" / "timings.md"
OUTPUTS = ("figures", "docs/timings.md", "dvc.lock")


def timings_path(profile: str) -> Path:
    return RUNS / profile / "timings.csv"


def load() -> float:
    """The one-minute load average (0 where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        # the outputs a run rewrites (figures, this doc, the pipeline's lock) are not changes to what ran
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){p}" for p in OUTPUTS)], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_name(notebook: str, parameters: dict | None = None) -> str:
    """A run's name in the timings: the notebook, then the parameters it was given (``--set``), so that notebook 08
    on board B_offline is a row of its own, not board A's latest."""
    return notebook + "".join(f" {k}={v}" for k, v in sorted((parameters or {}).items()))


def append(path: Path, profile: str, notebook: str, seconds: float, status: str, load_before: float,
           revision: str) -> None:
    """One row for one notebook's run (the file and its header are created on the first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({"when": datetime.now(UTC).isoformat(timespec="seconds"), "commit": revision,
                         "profile": profile, "notebook": notebook, "seconds": round(seconds, 1), "status": status,
                         "cpus": os.cpu_count(), "load_before": load_before, "load_after": load()})


def latest(path: Path) -> list[dict[str, str]]:
    """The latest row per notebook, in notebook order."""
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = {r["notebook"]: r for r in csv.DictReader(f)}
    return [rows[k] for k in sorted(rows)]


@dataclass(frozen=True)
class TableRow:
    """One notebook's row of the doc's table, as Markdown, with what the total needs."""

    notebook: str
    seconds: float
    ok: bool
    line: str


def _row(r: dict[str, str]) -> TableRow:
    line = (f"| {r['notebook']} | {float(r['seconds']):,.0f} | {r['status']} | {r['when']} | {r['commit']} | "
            f"{r['cpus']} | {r['load_before']} / {r['load_after']} |")
    return TableRow(r["notebook"], float(r["seconds"]), r["status"] == "ok", line)


def doc_rows(block: str) -> dict[str, TableRow]:
    """The notebook rows of a table this module wrote (header, separator and total skipped; a row whose seconds do
    not parse is dropped rather than guessed)."""
    found = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("notebook", "") or cells[0].startswith(("---", "**")):
            continue
        try:
            seconds = float(cells[1].replace(",", ""))
        except ValueError:
            continue
        found[cells[0]] = TableRow(cells[0], seconds, cells[2] == "ok", line.strip())
    return found


def timings_table(path: Path, kept: dict[str, TableRow] | None = None) -> str:
    """Markdown: notebook, seconds, status, when, commit, cores and load; the total of the finished ones. ``kept``:
    earlier rows, used for the notebooks ``path`` has no row for."""
    rows = {**(kept or {}), **{r["notebook"]: _row(r) for r in latest(path)}}
    lines = ["| notebook | seconds | status | when (UTC) | commit | cores | load before / after |",
             "|---|---|---|---|---|---|---|"]
    lines += [rows[k].line for k in sorted(rows)]
    total = sum(r.seconds for r in rows.values() if r.ok)
    lines.append(f"| **all that ran** | **{total:,.0f}** | | | | | |")
    return "\n".join(lines)


def update_doc(profile: str, path: Path | None = None, doc: Path | None = None) -> bool:
    """Replace the profile's block in ``doc`` (default ``DOC``) with the table; False when it has no such block."""
    doc = doc or DOC
    begin, end = f"<!-- timings:{profile}:begin -->", f"<!-- timings:{profile}:end -->"
    if not doc.exists():
        return False
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    block, tail = rest.split(end, 1)
    body = (f"\n_Written by `cachecraft reproduce --profile {profile}` from `runs/{profile}/timings.csv` "
            f"(the latest run of each notebook on the machine that ran it; rows it has none for kept from the "
            f"committed table)._\n\n"
            f"{timings_table(path or timings_path(profile), doc_rows(block))}\n")
    doc.write_text(head + begin + body + end + tail, encoding="utf-8")
    return True
