"""Limits for a whole sandbox on a cgroup v2 (unified) hierarchy: memory.max, pids.max, cpu.stat.

Two ways to a cgroup the caller may manage (cgroup v2 has one tree, and a non-root user may only write
where the tree was delegated to them):

- ``delegated``: the caller's own cgroup (``/proc/self/cgroup``'s ``0::`` line) is writable and its
  ``cgroup.subtree_control`` enables (or lets this process enable) ``memory`` and ``pids``: one child
  cgroup per sandbox is made under it, as in v1 (``CGroup2``). A container or a systemd unit with
  ``Delegate=yes`` gives this.
- ``scope``: otherwise, ``systemd-run --user --scope -p MemoryMax= -p TasksMax=`` makes a transient scope
  (systemd delegates every user's ``user@UID.service`` subtree to them); the sandbox's command runs in it
  (``scope_command``) and ``CGroup2.attach`` finds the scope's folder from the child's ``/proc/PID/cgroup``.

Either way the sandbox's CPU time is ``cpu.stat``'s ``usage_usec``, the memory cap ``memory.max`` (and
``memory.swap.max`` 0: no way out through swap), the process cap ``pids.max``, and ``kill`` writes
``cgroup.kill`` (every process at once) before it removes the folder.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import time
from pathlib import Path

from .cgroup import kill_until_empty, remove_when_empty

ROOT = Path("/sys/fs/cgroup")
NEEDED = ("memory", "pids")
_COUNT = itertools.count()


def own_path(root: Path = ROOT, proc_cgroup: str = "/proc/self/cgroup") -> Path | None:
    """This process's cgroup folder in the unified hierarchy (None on a v1-only machine)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    if not (root / "cgroup.controllers").is_file():
        return None  # a v1 (or hybrid without the unified tree mounted at root) machine
    for line in lines:
        hierarchy, _, path = line.split(":", 2)
        if hierarchy == "0":
            folder = root / path.lstrip("/")
            return folder if folder.is_dir() else None
    return None


def delegated_missing(folder: Path | None) -> str | None:
    """Why sandbox cgroups cannot be made under ``folder`` (None when they can)."""
    if folder is None:
        return "no cgroup v2 hierarchy (or this process is not in it)"
    if not os.access(folder, os.W_OK):
        return f"{folder} is not writable (not delegated to this user)"
    enabled = _words(folder / "cgroup.subtree_control")
    lacking = [c for c in NEEDED if c not in enabled]
    if not lacking:
        return None
    available = _words(folder / "cgroup.controllers")
    if any(c not in available for c in lacking):
        return f"{folder} does not offer the {', '.join(lacking)} controller(s) to its children"
    try:
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in lacking))
    except OSError as err:  # EBUSY: processes in the folder itself (cgroup v2's no-internal-process rule)
        return f"{folder}: cannot enable {', '.join(lacking)} for its children ({err.strerror})"
    return None


def scope_missing() -> str | None:
    """Why ``systemd-run --user --scope`` cannot give a sandbox a cgroup here (None when it can)."""
    exe = shutil.which("systemd-run")
    if exe is None:
        return "no systemd-run (a transient scope needs systemd's user manager)"
    try:
        done = subprocess.run([exe, *scope_args("cachecraft-probe", 64 << 20, 4), "true"], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"systemd-run did not run ({type(err).__name__})"
    if done.returncode != 0:
        return f"systemd-run --user --scope failed ({done.stderr.decode(errors='replace').strip()[:200]})"
    return None


def scope_args(unit: str, memory_bytes: int, max_pids: int) -> list[str]:
    """``systemd-run``'s arguments for a transient scope that caps memory, swap and tasks."""
    return ["--user", "--scope", "--quiet", "--collect", f"--unit={unit}", f"--property=MemoryMax={memory_bytes}",
            "--property=MemorySwapMax=0", f"--property=TasksMax={max_pids}", "--"]


def scope_command(argv: list[str], memory_bytes: int, max_pids: int) -> tuple[str, list[str]]:
    """(the unit's name, ``argv`` run in a new transient scope)."""
    unit = f"cachecraft-sandbox-{os.getpid()}-{next(_COUNT)}.scope"
    return unit, [shutil.which("systemd-run") or "systemd-run", *scope_args(unit[:-len(".scope")], memory_bytes,
                                                                               max_pids), *argv]


class CGroup2:
    """One sandbox's cgroup v2 folder; ``kill`` ends everything in it and removes it (a scope's is removed
    by systemd once empty)."""

    def __init__(self, parent: Path | None, memory_bytes: int, max_pids: int, root: Path = ROOT) -> None:
        self.root, self.folders, self._made = root, {}, False
        if parent is None:  # a scope: ``attach`` finds the folder once systemd has made it
            return
        folder = parent / f"cachecraft-sandbox-{os.getpid()}-{next(_COUNT)}"
        folder.mkdir()
        self.folders, self._made = {"unified": folder}, True
        try:
            self._write("memory.max", memory_bytes)
            if (folder / "memory.swap.max").exists():
                self._write("memory.swap.max", 0)  # no way out through swap
            self._write("pids.max", max_pids)
        except OSError:
            self.kill()
            raise

    @property
    def folder(self) -> Path:
        return self.folders.get("unified", Path("/nonexistent"))

    def _write(self, file: str, value: int) -> None:
        (self.folder / file).write_text(str(value))

    def enter(self) -> None:
        """Move the calling process into the cgroup (called in the child between fork and exec)."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def attach(self, pid: int, unit: str, patience_s: float = 30.0, proc: str = "/proc") -> None:
        """Find the scope ``unit`` that ``pid`` runs in (systemd-run moves it there before it execs the command)."""
        end = time.monotonic() + patience_s
        while time.monotonic() < end:
            try:
                text = Path(f"{proc}/{pid}/cgroup").read_text()
            except OSError:
                break
            for line in text.splitlines():
                path = line.split(":", 2)[2]
                if line.startswith("0:") and path.rstrip("/").endswith("/" + unit):
                    self.folders = {"unified": self.root / path.lstrip("/")}
                    return
            time.sleep(0.002)
        raise OSError(f"the sandbox's process did not reach its scope {unit}")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def n_processes(self) -> int:
        """Processes (and threads) in the sandbox now."""
        return _read_int(self.folder / "pids.current")

    def cpu_seconds(self) -> float:
        """CPU time of every process the sandbox ever ran (``cpu.stat``'s ``usage_usec``)."""
        return _field(self.folder / "cpu.stat", "usage_usec") / 1e6

    def oom_kills(self) -> int:
        """Processes the kernel killed for the sandbox's memory cap (``memory.events``' ``oom_kill``)."""
        return _field(self.folder / "memory.events", "oom_kill")

    def pid_limit_hits(self) -> int:
        """Forks the process cap refused (``pids.events``' ``max``)."""
        return _field(self.folder / "pids.events", "max")

    def kill(self, patience_s: float = 5.0) -> None:
        """Kill every process in the cgroup (``cgroup.kill``, else one by one), then remove a folder made here."""
        if not self.folders:
            return
        try:
            (self.folder / "cgroup.kill").write_text("1")
        except OSError:
            pass
        kill_until_empty(self.pids, patience_s)
        if self._made:
            remove_when_empty(self.folder)
        self.folders = {}


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _field(path: Path, name: str) -> int:
    """A ``key value`` file's value for ``name`` (0 where missing)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0
