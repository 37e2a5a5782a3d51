"""Limits for a whole sandbox, not one process: a cgroup v1 for memory, process count and CPU time (v2: ``cgroup2``).

RLIMIT_AS bounds one process, so a method that forks holds the cap twice; a cgroup charges every process
of the sandbox together. One cgroup per sandbox is made under this process's own cgroup in each of the
``memory``, ``pids`` and ``cpuacct`` hierarchies (so the sandbox stays inside whatever bounds the caller
already has), the sandbox's first process enters it before it runs anything (``enter``), and ``kill``
ends every process in it and removes it, so nothing the method started survives the evaluation.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpuacct")
_COUNT = itertools.count()


def own_path(controller: str, proc_cgroup: str = "/proc/self/cgroup") -> Path | None:
    """The folder of this process's cgroup in ``controller``'s v1 hierarchy (None without one)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            folder = ROOT / controller / path.lstrip("/")
            return folder if folder.is_dir() else None
    return None


def missing() -> str | None:
    """Why a sandbox cgroup cannot be made here (None when it can)."""
    for controller in CONTROLLERS:
        folder = own_path(controller)
        if folder is None:
            return (f"no cgroup v1 '{controller}' hierarchy under {ROOT} (the sandbox needs the memory, pids and "
                    "cpuacct controllers; a cgroup v2 machine uses cgroup2.py instead)")
        if not os.access(folder, os.W_OK):
            return f"{folder} is not writable (run as root, or delegate the cgroup to this user)"
    return None


class CGroup:
    """One sandbox's cgroup in every controller; ``kill`` removes it."""

    def __init__(self, memory_bytes: int, max_pids: int) -> None:
        name = f"cachecraft-sandbox-{os.getpid()}-{next(_COUNT)}"
        self.folders: dict[str, Path] = {}
        try:
            for controller in CONTROLLERS:
                folder = own_path(controller) / name
                folder.mkdir()
                self.folders[controller] = folder
            self._write("memory", "memory.limit_in_bytes", memory_bytes)
            if (self.folders["memory"] / "memory.memsw.limit_in_bytes").exists():
                self._write("memory", "memory.memsw.limit_in_bytes", memory_bytes)  # no way out through swap
            self._write("pids", "pids.max", max_pids)
        except OSError:
            self.kill()
            raise

    def _write(self, controller: str, file: str, value: int) -> None:
        (self.folders[controller] / file).write_text(str(value))

    def _at(self, controller: str) -> Path:
        return self.folders.get(controller, Path("/nonexistent"))

    def enter(self) -> None:
        """Move the calling process into the cgroup (called in the child between fork and exec)."""
        pid = str(os.getpid())
        for folder in self.folders.values():
            with open(folder / "cgroup.procs", "w") as f:
                f.write(pid)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self._at("pids") / "cgroup.procs").read_text().split()]
        except (OSError, KeyError, ValueError):
            return []

    def n_processes(self) -> int:
        """Processes (and threads) in the sandbox now."""
        return _read_int(self._at("pids") / "pids.current")

    def cpu_seconds(self) -> float:
        """CPU time of every process the sandbox ever ran (the dead ones too)."""
        return _read_int(self._at("cpuacct") / "cpuacct.usage") / 1e9

    def oom_kills(self) -> int:
        """Processes the kernel killed for the sandbox's memory cap."""
        try:
            text = (self._at("memory") / "memory.oom_control").read_text()
        except OSError:
            return 0
        fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(fields.get("oom_kill", 0))

    def pid_limit_hits(self) -> int:
        """Forks the process cap refused."""
        try:
            return int((self._at("pids") / "pids.events").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    def kill(self, patience_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup until none is left, then remove the cgroup's folders."""
        kill_until_empty(self.pids, patience_s)
        for folder in self.folders.values():
            remove_when_empty(folder)
        self.folders = {}


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0


def kill_until_empty(pids: Callable[[], list[int]], patience_s: float) -> None:
    """SIGKILL the processes ``pids()`` names until it names none (or ``patience_s`` passes): a cgroup's list can
    grow while it is being emptied, so one pass is not enough. Shared by the v1 and the v2 cgroup."""
    end = time.monotonic() + patience_s
    while (found := pids()) and time.monotonic() < end:
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def remove_when_empty(folder: Path) -> None:
    """Remove a cgroup's folder once the kernel lets go of it: a killed process leaves its cgroup a moment after
    it is reaped, so the first ``rmdir`` may fail (EBUSY); gone already is fine."""
    for _ in range(200):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.005)
