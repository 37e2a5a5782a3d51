"""Limits for a whole sandbox on a cgroup v2 (unified) hierarchy: memory.max, pids.max, cpu.stat.

Two ways to a cgroup the caller may manage (cgroup v2 has one tree, and a process may only write where the
tree was delegated to it):

- ``delegated``: the caller's own cgroup (``/proc/self/cgroup``'s ``0::`` line) is writable and its
  ``cgroup.subtree_control`` enables (or lets this process enable) ``memory`` and ``pids``: one child
  cgroup per sandbox is made under it, as in v1 (``CGroup2``). A systemd unit with ``Delegate=yes`` (systemd
  marks its cgroup with the ``trusted.delegate`` / ``user.delegate`` attribute) or a container's own cgroup
  gives this; since a cgroup with processes in it cannot enable controllers for its children (cgroup v2's
  no-internal-process rule), the unit's processes are first moved into a leaf, ``HARNESS_LEAF``, as systemd's
  delegation rules ask. The only mode for a root harness: its sandboxes drop to an unprivileged uid before
  they start, so they cannot ask any systemd manager for a scope.
- ``scope``: for an unprivileged harness, ``systemd-run --user --scope -p MemoryMax= -p TasksMax=`` makes a
  transient scope in the user's own systemd manager (which systemd delegates to the user; lingering keeps it
  running without a login); the sandbox's command runs in it (``scope_command``) and ``CGroup2.attach``
  finds the scope's folder from the child's ``/proc/PID/cgroup``. ``systemd-run`` finds that manager through
  ``XDG_RUNTIME_DIR`` / ``DBUS_SESSION_BUS_ADDRESS``, which the sandbox's cleared environment lacks, so the
  command sets them (``session_env``) for ``systemd-run`` alone (bubblewrap clears them again).

Either way the sandbox's CPU time is ``cpu.stat``'s ``usage_usec``, the memory cap ``memory.max`` (and
``memory.swap.max`` 0: no way out through swap), the process cap ``pids.max``, and ``kill`` writes
``cgroup.kill`` (every process at once) before it removes the folder.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import subprocess
import time
from pathlib import Path

from .cgroup import kill_until_empty, remove_when_empty

ROOT = Path("/sys/fs/cgroup")
NEEDED = ("memory", "pids")
HARNESS_LEAF = "cachecraft-harness"  # where a delegated cgroup's own processes move (no-internal-process rule)
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")
RUN_USER = Path("/run/user")
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
            if folder.name == HARNESS_LEAF:  # moved there by ``delegated_missing`` (here or in a parent process)
                folder = folder.parent
            return folder if folder.is_dir() else None
    return None


def is_delegated(folder: Path, root: Path = ROOT) -> bool:
    """Whether ``folder`` was handed to this process to organise: systemd marks a ``Delegate=yes`` unit's cgroup
    (``trusted.delegate`` / ``user.delegate`` = 1); a container's cgroup namespace shows its own as the root."""
    if folder == root:
        return True
    for name in DELEGATE_XATTRS:
        try:
            if os.getxattr(folder, name).strip(b"\0") == b"1":
                return True
        except OSError:
            continue
    return False


def move_into_leaf(folder: Path, tries: int = 5) -> None:
    """Move every process of ``folder`` into ``folder/HARNESS_LEAF`` (a process forked meanwhile: tried again)."""
    leaf = folder / HARNESS_LEAF
    leaf.mkdir(exist_ok=True)
    for _ in range(tries):
        pids = (folder / "cgroup.procs").read_text().split()
        if not pids:
            return
        for pid in pids:
            try:
                (leaf / "cgroup.procs").write_text(pid)
            except ProcessLookupError:
                pass  # it ended


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
    enable = " ".join(f"+{c}" for c in lacking)
    try:
        (folder / "cgroup.subtree_control").write_text(enable)
        return None
    except OSError as err:  # EBUSY: processes in the folder itself (cgroup v2's no-internal-process rule)
        if err.errno != errno.EBUSY or not is_delegated(folder):
            return (f"{folder}: cannot enable {', '.join(lacking)} for its children ({err.strerror}; "
                    f"not a delegated cgroup: no Delegate=yes)")
    try:
        move_into_leaf(folder)
        (folder / "cgroup.subtree_control").write_text(enable)
    except OSError as err:
        return f"{folder} (delegated): cannot move its processes into {HARNESS_LEAF} or enable {enable} ({err})"
    return None


def session_env(environ: dict[str, str] | None = None, uid: int | None = None,
                run_user: Path = RUN_USER) -> dict[str, str]:
    """Where ``systemd-run --user`` finds this user's manager: ``XDG_RUNTIME_DIR`` (else ``/run/user/UID``,
    which lingering or a login makes) and ``DBUS_SESSION_BUS_ADDRESS`` (else the manager's bus in it)."""
    environ = os.environ if environ is None else environ
    runtime = environ.get("XDG_RUNTIME_DIR") or str(run_user / str(os.getuid() if uid is None else uid))
    bus = environ.get("DBUS_SESSION_BUS_ADDRESS") or f"unix:path={runtime}/bus"
    return {"XDG_RUNTIME_DIR": runtime, "DBUS_SESSION_BUS_ADDRESS": bus}


def session_missing(env: dict[str, str]) -> str | None:
    """Why this user has no systemd user manager to ask (None when its runtime folder and bus are there)."""
    runtime = Path(env["XDG_RUNTIME_DIR"])
    if not runtime.is_dir():
        return (f"no systemd user session: {runtime} does not exist (no login session and no lingering; "
                f"`loginctl enable-linger {_user_name()}` as root starts the user's manager at boot)")
    bus = env["DBUS_SESSION_BUS_ADDRESS"]
    if bus.startswith("unix:path=") and not Path(bus[len("unix:path="):]).exists():
        return (f"no user bus at {bus[len('unix:path='):]} (the user's systemd manager is reached over D-Bus: "
                f"apt-get install dbus-user-session, then log in again)")
    return None


def scope_missing(euid: int | None = None) -> str | None:
    """Why ``systemd-run --user --scope`` cannot give a sandbox a cgroup here (None when it can): tried with the
    very command and environment a sandbox starts with (``scope_command``, nothing inherited)."""
    if (os.geteuid() if euid is None else euid) == 0:
        return ("the harness is root: its sandboxes drop to an unprivileged uid before they start, so no systemd "
                "manager gives them a scope; run the harness in a delegated cgroup (`systemd-run --scope -p "
                "Delegate=yes --quiet -- cachecraft ...`, or Delegate=yes in its unit)")
    if shutil.which("systemd-run") is None:
        return "no systemd-run (a transient scope needs systemd's user manager)"
    session = session_env()
    missing = session_missing(session)
    if missing is not None:
        return missing
    _, argv = scope_command(["true"], 64 << 20, 4, session)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={}, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"systemd-run did not run ({type(err).__name__})"
    if done.returncode != 0:
        return f"systemd-run --user --scope failed ({done.stderr.decode(errors='replace').strip()[:200]})"
    return None


def scope_args(unit: str, memory_bytes: int, max_pids: int) -> list[str]:
    """``systemd-run``'s arguments for a transient scope that caps memory, swap and tasks."""
    return ["--user", "--scope", "--quiet", "--collect", f"--unit={unit}", f"--property=MemoryMax={memory_bytes}",
            "--property=MemorySwapMax=0", f"--property=TasksMax={max_pids}", "--"]


def scope_command(argv: list[str], memory_bytes: int, max_pids: int,
                  session: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """(the unit's name, ``argv`` run in a new transient scope): ``env`` gives ``systemd-run`` the user manager's
    address (``session``, default ``session_env()``) on top of the sandbox's cleared environment."""
    unit = f"cachecraft-sandbox-{os.getpid()}-{next(_COUNT)}.scope"
    session = session_env() if session is None else session
    return unit, [shutil.which("env") or "/usr/bin/env", *(f"{k}={v}" for k, v in sorted(session.items())),
                  shutil.which("systemd-run") or "systemd-run",
                  *scope_args(unit[:-len(".scope")], memory_bytes, max_pids), *argv]


def _user_name() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        return "$USER"


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


def words_of(path: Path) -> str:
    """A cgroup file's words, space-separated ("" where unreadable)."""
    return " ".join(sorted(_words(path)))


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
