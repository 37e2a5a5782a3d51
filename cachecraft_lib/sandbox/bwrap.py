"""bubblewrap's command for one sandbox, and the uid it runs as outside (never root).

The sandbox sees only neutral paths: the interpreter's prefix at ``/sandbox/python``, the runtime at
``/sandbox/runtime``, numpy and the layer's files at ``/sandbox/site``, the system libraries, five device
nodes (``null``, ``zero``, ``full``, ``random``, ``urandom``; no pseudo-terminals) and no ``/proc``: the
``/proc`` views (``mountinfo`` above all, which names every bind's source) would show the host's paths (the
checkout, the virtual environment, the home folder), and nothing the runtime does needs them (the
address-space cap it sets from ``/proc/self/statm`` is measured once by ``boundary``'s probe instead). The
root and ``/dev`` are remounted read-only: no tmpfs to fill.

Run by root, bubblewrap would map the sandbox's uid to root outside, sharing root's per-user kernel quotas
(inotify instances, pipe buffers, ...) with the host. So a root harness runs it as a uid of its own, leased from
a reserved range (``uids.py``; never ``nobody``, which the host's own processes share): between fork and exec
(``Launch.preexec``) the child enters its cgroup (as root), makes a private mount namespace with a small tmpfs
at ``STAGE`` where it binds what the sandbox needs (so bubblewrap, now unprivileged, reaches files under folders
like ``/root`` that other users may not read), then drops to the uid.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .uids import uid_range

BWRAP_ENV = "CACHECRAFT_BWRAP"  # a bubblewrap binary to use (e.g. one carried to a machine without it)
CARRIED = Path(__file__).resolve().parents[2] / "gpu_wheels" / "bubblewrap"  # scripts/gpu_wheels.sh unpacks it
STAGE = Path("/run/cachecraft-sandbox")
SYSTEM_LIBS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32")
DEVICES = ("null", "zero", "full", "random", "urandom")
CHILD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
             "PYTHONDONTWRITEBYTECODE": "1"}
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x20000, 0x1000, 0x4000, 1 << 18, 2, 4
CLONE_NEWTIME = 0x80


def find() -> Path | None:
    """The bubblewrap binary: ``$CACHECRAFT_BWRAP``, then ``bwrap`` on PATH, then the one the GPU check carries."""
    given = os.environ.get(BWRAP_ENV)
    if given:
        return Path(given) if os.access(given, os.X_OK) else None
    on_path = shutil.which("bwrap")
    if on_path:
        return Path(on_path)
    carried = CARRIED / "usr" / "bin" / "bwrap"
    return carried if os.access(carried, os.X_OK) else None


def library_dir(exe: Path) -> Path | None:
    """The shared libraries carried beside a bubblewrap binary (``<dir>/usr/bin/bwrap`` -> ``<dir>/libs``)."""
    folder = exe.parents[2] / "libs" if len(exe.parents) > 2 else None
    return folder if folder is not None and folder.is_dir() else None


def outside_uid() -> int | None:
    """The first uid of the range a root harness's sandboxes lease theirs from (``uids.lease_uid``: one each);
    None when the harness is not root (its sandboxes run as its own uid)."""
    if os.geteuid() != 0:
        return None
    return uid_range()[0]


# A mount source meaning "an empty folder here": a read-only tmpfs bubblewrap mounts when the sandbox starts, so its
# times are the sandbox's own start (a host folder made once per harness dated the harness's start: a method could
# tell how long the run had gone on, a context counter; red team, 2026-12-07).
EMPTY_FOLDER = Path("/cachecraft-empty-folder")


@dataclass(frozen=True)
class Launch:
    """How to start one sandbox: ``argv``, the environment, and what runs between fork and exec."""

    argv: list[str]
    env: dict[str, str]
    preexec: Callable[[], None] | None


def launch(exe: Path, mounts: list[tuple[Path, str]], tail: list[str], enter: Callable[[], None] | None,
           seccomp_fd: int | None, uid: int | None, system: tuple[tuple[Path, str], ...] = (),
           lib_path: str | None = None) -> Launch:
    """bubblewrap running ``tail`` (the interpreter's argv inside) with ``mounts`` (host path, path under
    ``/sandbox``) read-only; ``enter`` (the cgroup) runs first in the child; ``uid``: drop to it (root only);
    ``system``: the system libraries (host file, the path inside: ``libraries.py``), bound by bubblewrap itself
    (readable by any uid); ``lib_path``: the sandbox's ``LD_LIBRARY_PATH`` (a path under ``/sandbox``)."""
    libs = library_dir(exe) if exe.is_relative_to(CARRIED) or os.environ.get(BWRAP_ENV) else None
    if uid is not None:
        staged = [(exe, "bin/bwrap"), *([(libs, "lib")] if libs else []),
                  *[(src, rel) for src, rel in mounts if src != EMPTY_FOLDER]]
        binds = [(src if src == EMPTY_FOLDER else STAGE / rel, rel) for src, rel in mounts]
        exe, libs = STAGE / "bin" / "bwrap", (STAGE / "lib" if libs else None)
        preexec = functools.partial(_stage_and_drop, enter, [(str(s), str(STAGE / r)) for s, r in staged], uid)
    else:
        binds, preexec = [(src, rel) for src, rel in mounts], enter
    argv = [str(exe), *namespace_args(), *(["--setenv", "LD_LIBRARY_PATH", lib_path] if lib_path else []),
            *bind_args(binds, system)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    env = {**CHILD_ENV, **({"LD_LIBRARY_PATH": str(libs)} if libs else {})}
    return Launch([*argv, "--", *tail], env, preexec)


def namespace_args() -> list[str]:
    return ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--uid",
            "65534", "--gid", "65534", "--hostname", "sandbox", "--clearenv",
            *[a for k, v in CHILD_ENV.items() for a in ("--setenv", k, v)], "--cap-drop", "ALL", "--chdir", "/"]


def bind_args(binds: list[tuple[Path, str]], system: tuple[tuple[Path, str], ...] = ()) -> list[str]:
    """Read-only binds (the system libraries' folders' links, each library ``system`` names, ``binds`` under
    ``/sandbox``), the devices, then a read-only root. The library folders are not bound whole: their gigabytes
    were one page cache shared by every sandbox (``libraries.py``)."""
    args: list[str] = []
    for path in SYSTEM_LIBS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
    for src, inside in system:
        args += ["--ro-bind", str(src), inside]
    for src, rel in binds:
        if src == EMPTY_FOLDER:
            args += ["--tmpfs", f"/sandbox/{rel}", "--remount-ro", f"/sandbox/{rel}"]
        else:
            args += ["--ro-bind", str(src), f"/sandbox/{rel}"]
    args += ["--dir", "/dev"]
    for name in DEVICES:
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    return [*args, "--remount-ro", "/"]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _stage_and_drop(enter: Callable[[], None] | None, staged: list[tuple[str, str]], uid: int) -> None:
    """In the child, as root: enter the cgroup, bind ``staged`` (source, target) in a private mount namespace
    on a tmpfs at ``STAGE``, then become ``uid`` (no groups, no capabilities left)."""
    if enter is not None:
        enter()
    libc = _libc()
    _private_clocks(libc)
    _check(libc.unshare(CLONE_NEWNS), "unshare")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    _check(libc.mount(b"cachecraft", str(STAGE).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"),
           "stage")
    for source, target in staged:
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.exists(target):  # a file bound over on a read-only prefix exists: opening it for
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))  # writing fails (EROFS)
        _check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {target}")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _private_clocks(libc: ctypes.CDLL) -> None:
    """A time namespace whose monotonic and boot clocks start at about 1 s (the host's uptime is not the sandbox's
    to read: the vDSO answers those clocks without a system call a filter could refuse); bubblewrap enters it at
    exec. Nothing on a kernel without time namespaces (before 5.6)."""
    if libc.unshare(CLONE_NEWTIME) != 0:
        return
    offsets = {name: int(time.clock_gettime(clock)) - 1
               for name, clock in (("monotonic", time.CLOCK_MONOTONIC), ("boottime", time.CLOCK_BOOTTIME))}
    try:
        with open("/proc/self/timens_offsets", "w") as f:
            f.write("".join(f"{name} {-seconds} 0\n" for name, seconds in offsets.items()))
    except OSError:
        pass  # the new namespace keeps the host's clocks: no worse than without it


def prepare_stage() -> None:
    """The (empty) mount point of the stage, made once by a root harness."""
    STAGE.mkdir(mode=0o755, parents=True, exist_ok=True)


def interpreter() -> tuple[str, str]:
    """This interpreter's path inside the sandbox (under ``/sandbox/python``) and here."""
    real = os.path.realpath(sys.executable)
    inside = os.path.relpath(real, os.path.realpath(sys.base_prefix))
    if inside.startswith(".."):
        raise OSError(f"the interpreter {real} is not under its prefix {sys.base_prefix}")
    return f"/sandbox/python/{inside}", real
