"""``make check-figures`` / ``cachecraft reproduce --check``: which committed outputs are stale, and why, without a model.

Reads ``dvc.yaml`` and ``dvc.lock`` through DVC and hashes the files they name (seconds). Three answers per stage:
current; stale (a dependency changed since the lock: the files named, the notebooks upstream that rerun first;
or an output the lock never recorded: not there yet, a file the stage writes since its last run, or there, made by a
run from before the stage declared it); or EDITED (a committed output no longer matches the hash the lock recorded: changed by hand, or regenerated
without the pipeline). Only EDITED outputs, or a ``dvc.yaml`` that no longer matches the notebooks' imports, make
the check fail: a stale output is the normal state between a code change and the next ``make reproduce``.
Measurements (notebook 06) and arena rounds (notebook 08: replayed when revealed, frozen otherwise) are reported
as such.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import REPO

KIND_NOTE = {"measurement": "a measurement: a rerun records new timings (never the same bytes)",
             "round": "an arena round, frozen: `make reproduce` leaves it (a rerun would draw a fresh secret)",
             "replay": "an arena round replayed with its revealed secret and committed plan (a reproduction)"}


@dataclass
class StageStatus:
    """What the check found for one stage."""

    name: str
    kind: str
    changed_deps: dict[str, str] = field(default_factory=dict)  # path -> modified / deleted / new
    edited_outs: dict[str, str] = field(default_factory=dict)
    new_outs: list[str] = field(default_factory=list)  # declared, never made: not in dvc.lock, not on disk
    unrecorded_outs: list[str] = field(default_factory=list)  # on disk, but a run before they were declared made them
    command_changed: bool = False
    upstream: list[str] = field(default_factory=list)  # stale stages whose outputs this one reads
    outs: int = 0

    @property
    def stale(self) -> bool:
        return bool(self.changed_deps or self.command_changed or self.upstream or self.new_outs
                    or self.unrecorded_outs)


@dataclass
class Report:
    stages: list[StageStatus]
    yaml_current: bool = True

    @property
    def failed(self) -> bool:
        return not self.yaml_current or any(s.edited_outs for s in self.stages)


def _changes(entries: list) -> tuple[dict[str, str], dict[str, str], bool]:
    deps: dict[str, str] = {}
    outs: dict[str, str] = {}
    command = False
    for entry in entries:
        if isinstance(entry, dict):
            deps.update(entry.get("changed deps", {}))
            outs.update(entry.get("changed outs", {}))
        elif entry in ("changed command", "changed checksum"):
            command = True
    return deps, outs, command


def collect(root: Path = REPO) -> list[StageStatus]:
    """Every stage's status, frozen ones included (their dependencies are read too, and reported, not rerun)."""
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    from dvc.repo import Repo

    found: list[StageStatus] = []
    locked, locked_outs = _locked_deps(root), _locked_deps(root, "outs")
    with Repo(str(root)) as repo, repo.lock:
        stages = list(repo.index.stages)
        graph = repo.index.graph
        for stage in stages:
            stage.frozen = False  # read a frozen stage's dependencies as well; nothing is run or written
            entries = stage.status().get(stage.addressing, [])
            deps, outs, command = _changes(entries)
            deps = {p: c if p in locked.get(stage.name, ()) else "newly reached" for p, c in deps.items()}
            unlocked = sorted(p for p in outs if p not in locked_outs.get(stage.name, ()))
            new = [p for p in unlocked if outs[p] == "deleted"]
            unrecorded = [p for p in unlocked if outs[p] != "deleted"]  # nothing to compare them with: not EDITED
            outs = {p: c for p, c in outs.items() if p not in unlocked}
            meta = stage.meta or {}
            found.append(StageStatus(stage.name, meta.get("kind", "computed"), deps, outs, new, unrecorded, command,
                                     outs=len(stage.outs)))
        by_name = {s.name: s for s in found}
        for stage in stages:
            ancestors = [a.name for a in _ancestors(graph, stage)]
            by_name[stage.name].upstream = [a for a in ancestors if a in by_name and by_name[a].stale]
    return found


def _locked_deps(root: Path, key: str = "deps") -> dict[str, set[str]]:
    """Each stage's dependencies (``key="outs"``: outputs) as ``dvc.lock`` recorded them: a dependency that is not
    there is new to the stage (the notebook reaches a module it did not reach when its outputs were made), which
    DVC reports as modified; a missing output that is not there was never made (DVC says deleted)."""
    import yaml

    path = root / "dvc.lock"
    stages = (yaml.safe_load(path.read_text()) or {}).get("stages", {}) if path.is_file() else {}
    return {name: {d["path"] for d in stage.get(key, [])} for name, stage in stages.items()}


def _ancestors(graph, stage) -> list:
    """Stages whose outputs ``stage`` reads (DVC's graph points from a stage to the stages it depends on)."""
    import networkx as nx

    return sorted(nx.descendants(graph, stage), key=lambda s: s.name)


def describe(report: Report) -> list[str]:
    """The check's lines, a reader's order: edited outputs first, then stale stages, then the current ones."""
    lines = []
    if not report.yaml_current:
        lines.append("dvc.yaml does not match the notebooks' imports: run `make pipeline`, then commit dvc.yaml")
    for s in report.stages:
        for path, change in sorted(s.edited_outs.items()):
            lines.append(f"EDITED  {path} ({change}): does not match dvc.lock (stage {s.name}); regenerate it with "
                         f"`make reproduce`, or restore it with `git checkout -- {path}`")
    for s in (s for s in report.stages if s.stale):
        why = [_grouped(change, sorted(p for p, c in s.changed_deps.items() if c == change))
               for change in sorted(set(s.changed_deps.values()))]
        why += [f"not yet made: {', '.join(s.new_outs)}"] * bool(s.new_outs)
        why += [f"not in dvc.lock yet: {', '.join(s.unrecorded_outs)}"] * bool(s.unrecorded_outs)
        why += ["its command changed"] * s.command_changed + [f"{u} reruns first" for u in s.upstream]
        shown = "; ".join(why)
        note = f" [{KIND_NOTE[s.kind]}]" if s.kind in KIND_NOTE else ""
        lines.append(f"STALE   {s.name} ({s.outs} outputs): {shown}{note}")
    current = [s.name for s in report.stages if not s.stale and not s.edited_outs]
    if current:
        lines.append(f"current: {', '.join(current)}")
    return lines


def _grouped(change: str, paths: list[str], shown: int = 4) -> str:
    """``modified: a, b, c and 9 more``: a stage can depend on a hundred files; the first few say enough."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return f"{change}: {', '.join(paths[:shown])}{more}"


def check(root: Path = REPO, verify_yaml: bool = True) -> Report:
    """The check's findings; ``verify_yaml`` also compares ``dvc.yaml`` with what the notebooks' imports imply."""
    report = Report(collect(root))
    if verify_yaml:
        from .pipeline import DVC_YAML, render, stages

        report.yaml_current = (root / DVC_YAML).read_text() == render(stages(root))
    return report


def run(root: Path = REPO) -> int:
    """Print the check and return its exit status (1: an output does not match the lock, or dvc.yaml is out of date;
    2: a ``dvc repro`` holds the pipeline's lock, so its outputs are half written and nothing can be said yet)."""
    from dvc.lock import LockError

    try:
        report = check(root)
    except LockError:
        print("the pipeline is busy: a `make reproduce` (dvc repro) is running in this checkout and rewriting its "
              "outputs; check again when it has finished")
        return 2
    for line in describe(report):
        print(line)
    stale = sum(s.stale for s in report.stages)
    print(f"{len(report.stages)} stages: {stale} stale, "
          f"{sum(len(s.edited_outs) for s in report.stages)} outputs edited outside the pipeline"
          + ("; rerun the stale ones with `make reproduce`" if stale else ""))
    return 1 if report.failed else 0
