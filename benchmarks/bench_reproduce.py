"""The main job's time before and after, in one run: chosen notebooks at a chosen profile, once at an older commit
and once at the working tree, side by side.

    nice -n 19 python benchmarks/bench_reproduce.py --before 3b027e5 --profile smoke --only 00 01 02   # minutes
    taskset -c 0,1 python benchmarks/bench_reproduce.py --before 3b027e5 --profile cpu                  # hours

Each side runs in a fresh checkout in a temporary folder: the older commit as a ``git worktree``, the working tree
as a worktree of HEAD with this checkout's uncommitted and untracked (not ignored) files laid over it. So neither
side finds the other's or this checkout's caches (``data/results``, ``runs/``), both start cold as a fresh clone
does, and nothing here is written (``figures/``, ``docs/timings.md``). Each notebook runs through that checkout's
own ``cachecraft reproduce --only NN`` with ``PYTHONPATH`` pointing at it (checked before the first run), the same
interpreter for both. The sides alternate per notebook (before first, then after first, ...), so a load that
drifts during the run falls on both; a notebook that reads another's output (07 reads 05's) finds the one its
own side wrote, since each side keeps its figures folder across notebooks.

It prints, per notebook: seconds before and after (wall time of the run, kernel start included), after / before,
and the one-minute load average before and after each run; the totals; and the load before and after the whole
benchmark. The timings are only as good as the machine is idle: the half-time target is measured on two idle
cores (docs/reproducing.md).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Side:
    """One version of the code: its checkout and what each notebook took there."""

    label: str  # "before" | "after"
    revision: str  # the commit (and "+changes" for the working tree's overlay)
    root: Path
    seconds: dict[str, float] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    load: dict[str, tuple[float, float]] = field(default_factory=dict)


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd or REPO, capture_output=True, text=True, check=True).stdout


def worktree(commit: str, dest: Path) -> Path:
    """A detached checkout of ``commit`` at ``dest`` (``git worktree``: shares this repository's objects)."""
    git("worktree", "add", "--detach", "--quiet", str(dest), commit)
    return dest


def overlay_working_tree(dest: Path) -> int:
    """Lay this checkout's uncommitted changes over a worktree of HEAD: modified and untracked (not ignored) files
    copied, deleted ones removed. Returns how many paths differ from HEAD."""
    changed = [p for p in git("ls-files", "-z", "--modified", "--others", "--exclude-standard").split("\0") if p]
    deleted = [p for p in git("ls-files", "-z", "--deleted").split("\0") if p]
    for rel in changed:
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for rel in deleted:
        (dest / rel).unlink(missing_ok=True)
    return len(set(changed) | set(deleted))


def side_env(root: Path) -> dict[str, str]:
    """The environment of a side's runs: its checkout first on the path, no folder override from this shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHECRAFT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def check_imports(side: Side, python: str) -> None:
    """The library the notebooks' kernels will import is the side's (they start in its notebooks folder)."""
    found = subprocess.run([python, "-c", "import cachecraft_lib; print(cachecraft_lib.__file__)"],
                           cwd=side.root / "notebooks", env=side_env(side.root), capture_output=True, text=True,
                           check=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(side.root.resolve()):
        raise SystemExit(f"{side.label}: cachecraft_lib imports from {found}, not from {side.root}")


def notebook_names(root: Path, only: list[str] | None) -> list[str]:
    books = sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    return [b for b in books if not only or any(b.startswith(o) or b == o for o in only)]


def run_notebook(side: Side, notebook: str, profile: str, python: str, sets: list[str], work: Path,
                 timeout: float | None) -> None:
    """One notebook at one side, through that checkout's ``cachecraft reproduce --only``."""
    if not (side.root / "notebooks" / f"{notebook}.ipynb").is_file():
        side.status[notebook] = "absent"
        return
    out = work / side.label
    cmd = [python, "-m", "cachecraft_lib.cli", "reproduce", "--profile", profile, "--only", notebook, "--quiet",
           "--out", str(out / "executed"), "--figures", str(out / "figures")]
    cmd += [a for s in sets for a in ("--set", s)]
    log = out / f"{notebook}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    before, start = load_average(), time.perf_counter()
    with open(log, "w") as f:
        try:
            code = subprocess.run(cmd, cwd=side.root, env=side_env(side.root), stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    side.seconds[notebook] = time.perf_counter() - start
    side.load[notebook] = (before, load_average())
    side.status[notebook] = "ok" if code == 0 else f"failed ({code}; {log})"
    print(f"  {side.label:6} {notebook}: {side.seconds[notebook]:,.1f} s, {side.status[notebook]}, "
          f"load {before} -> {side.load[notebook][1]}", flush=True)


def table(before: Side, after: Side, notebooks: list[str]) -> list[dict[str, str]]:
    """One row per notebook, then the total over those that ran on both sides."""
    rows = []
    both = [n for n in notebooks if before.status.get(n) == after.status.get(n) == "ok"]
    for n in notebooks:
        b, a = before.seconds.get(n), after.seconds.get(n)
        rows.append({"notebook": n, "before_s": f"{b:.1f}" if b is not None else "",
                     "after_s": f"{a:.1f}" if a is not None else "",
                     "after/before": f"{a / b:.2f}" if n in both else "",
                     "load_before_run": "{} -> {}".format(*before.load.get(n, ("", ""))),
                     "load_after_run": "{} -> {}".format(*after.load.get(n, ("", ""))),
                     "status": "ok" if n in both else f"before: {before.status.get(n)}; after: {after.status.get(n)}"})
    tb, ta = sum(before.seconds[n] for n in both), sum(after.seconds[n] for n in both)
    rows.append({"notebook": f"total ({len(both)} on both sides)", "before_s": f"{tb:.1f}", "after_s": f"{ta:.1f}",
                 "after/before": f"{ta / tb:.2f}" if tb else "", "load_before_run": "", "load_after_run": "",
                 "status": ""})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the older commit (e.g. 3b027e5, issue 58's measured main)")
    parser.add_argument("--profile", default="smoke", help="the profile both sides run at (default smoke)")
    parser.add_argument("--only", nargs="+", metavar="NN", help="notebook prefixes (default: every notebook)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a notebook parameter, "
                        "passed to both sides (an older commit's reproduce may not take --set)")
    parser.add_argument("--timeout", type=float, help="seconds per notebook run (default: none)")
    parser.add_argument("--csv", help="also write the table here")
    parser.add_argument("--keep", action="store_true", help="keep the two checkouts and their outputs")
    args = parser.parse_args(argv)
    python = sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench-reproduce-"))
    commit = git("rev-parse", "--short", args.before).strip()
    head = git("rev-parse", "--short", "HEAD").strip()
    start_load, start = load_average(), time.perf_counter()
    trees: list[Path] = []
    try:
        before = Side("before", commit, worktree(commit, work / "checkout-before"))
        trees.append(before.root)
        after = Side("after", head, worktree("HEAD", work / "checkout-after"))
        trees.append(after.root)
        if overlay_working_tree(after.root):
            after.revision += "+changes"
        for side in (before, after):
            check_imports(side, python)
        notebooks = notebook_names(after.root, args.only)
        print(f"bench_reproduce: profile {args.profile}, notebooks {' '.join(n[:2] for n in notebooks)}; before "
              f"{before.revision}, after {after.revision}; {os.cpu_count()} cores "
              f"({len(os.sched_getaffinity(0))} usable), load {start_load}; work folder {work}", flush=True)
        for i, notebook in enumerate(notebooks):
            for side in ((before, after) if i % 2 == 0 else (after, before)):
                run_notebook(side, notebook, args.profile, python, args.set, work, args.timeout)
        rows = table(before, after, notebooks)
        width = max(len(r["notebook"]) for r in rows)
        print(f"\n{'notebook':{width}}  {'before s':>9}  {'after s':>9}  {'after/before':>12}  "
              f"{'load (before run)':>17}  {'load (after run)':>17}  status")
        for r in rows:
            print(f"{r['notebook']:{width}}  {r['before_s']:>9}  {r['after_s']:>9}  {r['after/before']:>12}  "
                  f"{r['load_before_run']:>17}  {r['load_after_run']:>17}  {r['status']}")
        print(f"\nbefore = {before.revision}, after = {after.revision}, profile {args.profile}; load average "
              f"{start_load} before the benchmark, {load_average()} after; {time.perf_counter() - start:,.0f} s in all")
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                writer = csv.DictWriter(f, list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        return 0 if all(r["status"] in ("", "ok") for r in rows) else 1
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            for tree in trees:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
