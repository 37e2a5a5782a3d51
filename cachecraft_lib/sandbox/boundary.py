"""Where untrusted code runs: bubblewrap's namespaces + a seccomp filter + a cgroup, or nothing (fail closed).

``plan(allow_weak)`` checks the three parts once per process and returns a ``Boundary`` that builds each
sandbox's command. The full boundary (``"bwrap+seccomp+cgroup"``): Debian's ``bwrap`` puts the child in new
user, PID, mount, network, IPC, UTS and cgroup namespaces, in a new session, as uid/gid 65534, killed with
its parent, with a filesystem of only the interpreter, numpy and the child's own files (read-only), its own
``/proc`` mounted read-only (run as root, the sandbox's uid is root outside: a writable ``/proc`` would let it set
host-global sysctls), no capabilities, a minimal ``/dev``, no environment but a few thread settings; ``seccomp`` filters its system
calls; ``cgroup`` caps memory and processes of the whole sandbox. Where a part is missing, ``plan`` raises
``BoundaryUnavailable`` saying what is missing and how to install it, unless the caller opted in with
``allow_weak`` (or ``CACHECRAFT_ALLOW_WEAK_SANDBOX=1``): then the child runs with what is there, and
``Boundary.name`` says ``"weak: ..."`` so the caller can record it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import cgroup, seccomp

RUNTIME = Path(__file__).with_name("runtime")
FULL = "bwrap+seccomp+cgroup"
WEAK_ENV = "CACHECRAFT_ALLOW_WEAK_SANDBOX"
CHILD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
SYSTEM_LIBS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32")
INSTALL_BWRAP = "install it with `apt-get install -y bubblewrap` (or `make install` as root)"


class BoundaryUnavailable(RuntimeError):
    """The operating-system boundary cannot be set up here, and weakening it was not allowed."""


def weak_allowed(allow_weak: bool = False) -> bool:
    return allow_weak or os.environ.get(WEAK_ENV, "") not in ("", "0")


@functools.lru_cache(maxsize=1)
def _bwrap_missing() -> str | None:
    """Why bubblewrap cannot make the sandbox's namespaces here (None when it can); tried once."""
    exe = shutil.which("bwrap")
    if exe is None:
        return f"no bubblewrap (`bwrap` is not on PATH); {INSTALL_BWRAP}"
    probe = [exe, *_namespace_args(), *_bind_args(()), "--", _interpreter()[0], "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap did not run ({type(err).__name__}: {err})"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[:300]
        return (f"bubblewrap cannot create the sandbox's namespaces here ({why}); user namespaces must be "
                "allowed (sysctl kernel.unprivileged_userns_clone=1, or run as root)")
    return None


def missing_parts() -> dict[str, str]:
    """What is missing, by part (empty: the full boundary can be built)."""
    checks = {"seccomp": seccomp.missing(), "cgroup": cgroup.missing(), "bwrap": _bwrap_missing()}
    return {part: why for part, why in checks.items() if why}


@dataclass(frozen=True)
class Boundary:
    """The parts in use (``name``: ``"bwrap+seccomp+cgroup"`` or ``"weak: ..."``); builds commands."""

    bwrap: bool
    seccomp: bool
    cgroup: bool
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if not self.missing:
            return FULL
        kept = "+".join(p for p in ("bwrap", "seccomp", "cgroup") if getattr(self, p)) or "process only"
        return f"weak: {kept}; missing {', '.join(sorted(self.missing))}"

    def command(self, files: tuple[Path, ...], seccomp_fd: int | None) -> list[str]:
        """The argv that runs the child runtime with ``files`` importable (by their names)."""
        python_in, python_here = _interpreter()
        if not self.bwrap:
            paths = [str(RUNTIME), *dict.fromkeys(str(p.parent) for p in files), str(_numpy_dirs()[0].parent)]
            return [python_here, "-I", "-S", str(RUNTIME / "serve.py"), *paths]
        argv = [shutil.which("bwrap"), *_namespace_args(), *_bind_args(files)]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        return [*argv, "--", python_in, "-I", "-S", "/sandbox/runtime/serve.py", "/sandbox/runtime", "/sandbox/site"]


def plan(allow_weak: bool = False) -> Boundary:
    """The boundary this machine gives, or ``BoundaryUnavailable`` (fail closed, module doc)."""
    missing = missing_parts()
    if missing and not weak_allowed(allow_weak):
        lines = "\n".join(f"  - {part}: {why}" for part, why in sorted(missing.items()))
        raise BoundaryUnavailable(
            "the sandbox for untrusted code cannot be set up, so nothing was run:\n"
            f"{lines}\nInstall what is missing (`make install` as root installs bubblewrap and pyseccomp), or "
            f"accept a weaker boundary explicitly with Limits(allow_weak=True) / {WEAK_ENV}=1 (recorded).")
    return Boundary(bwrap="bwrap" not in missing, seccomp="seccomp" not in missing, cgroup="cgroup" not in missing,
                    missing=missing)


def _namespace_args() -> list[str]:
    return ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--uid", "65534",
            "--gid", "65534", "--hostname", "sandbox", "--clearenv",
            *[a for k, v in CHILD_ENV.items() for a in ("--setenv", k, v)],
            "--cap-drop", "ALL", "--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev", "--chdir", "/"]


def _bind_args(files: tuple[Path, ...]) -> list[str]:
    """Read-only binds: system libraries, the interpreter's prefix, numpy, the runtime and ``files``."""
    args: list[str] = []
    for path in SYSTEM_LIBS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--ro-bind", sys.base_prefix, "/sandbox/python", "--ro-bind", str(RUNTIME), "/sandbox/runtime"]
    for folder in _numpy_dirs():
        args += ["--ro-bind", str(folder), f"/sandbox/site/{folder.name}"]
    for path in files:
        args += ["--ro-bind", str(path), f"/sandbox/site/{path.name}"]
    return args


@functools.lru_cache(maxsize=1)
def _interpreter() -> tuple[str, str]:
    """This interpreter's path inside the sandbox (under ``/sandbox/python``) and here."""
    real = os.path.realpath(sys.executable)
    inside = os.path.relpath(real, os.path.realpath(sys.base_prefix))
    if inside.startswith(".."):
        raise BoundaryUnavailable(f"the interpreter {real} is not under its prefix {sys.base_prefix}")
    return f"/sandbox/python/{inside}", real


def _numpy_dirs() -> list[Path]:
    """numpy's package folder and the folder of the libraries its wheel bundles (``numpy.libs``)."""
    package = Path(np.__file__).resolve().parent
    libs = package.with_name("numpy.libs")
    return [package, *([libs] if libs.is_dir() else [])]
