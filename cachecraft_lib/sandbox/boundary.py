"""Where untrusted code runs: bubblewrap's namespaces + a default-deny seccomp filter + a cgroup where one can be
had, or nothing (fail closed).

``plan(allow_weak)`` checks the parts once per process and returns a ``Boundary`` that builds each sandbox's
launch (``bwrap.py``: namespaces, neutral paths, no ``/proc``, a uid outside that is never root). Its
``name`` says the mode:

- ``FULL`` ("bwrap+seccomp+cgroup", cgroup v1) or ``FULL_V2`` ("bwrap+seccomp+cgroup2", a delegated cgroup
  v2 folder or a systemd scope): memory, tasks and CPU of the whole sandbox are the cgroup's;
- ``NO_CGROUP`` ("bwrap+seccomp+rlimits"): no cgroup can be had (or ``CACHECRAFT_SANDBOX_NO_CGROUP=1``), and
  the sandbox is still whole: the filter refuses new processes (it does in every mode), so the limits the
  runtime sets on its one process (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC) bound all of it;
- ``"weak: ..."``: bubblewrap, the filter, or (as root) the drop to an unprivileged uid is missing. Nothing
  runs then (``BoundaryUnavailable`` says what is missing and how to get it; ``cachecraft doctor`` says the
  same) unless the caller opted in (``allow_weak``, ``--allow-weak-sandbox`` or ``CACHECRAFT_ALLOW_WEAK_SANDBOX=1``,
  recorded with every result by the name).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import bwrap, libraries, resident, seccomp, uids
from .cgroup_mode import NO_CGROUP_ENV, CgroupMode, detect

RUNTIME = Path(__file__).with_name("runtime")
FULL, FULL_V2, NO_CGROUP = "bwrap+seccomp+cgroup", "bwrap+seccomp+cgroup2", "bwrap+seccomp+rlimits"
WHOLE = (FULL, FULL_V2, NO_CGROUP)
WEAK_ENV = "CACHECRAFT_ALLOW_WEAK_SANDBOX"
CHILD_ENV = bwrap.CHILD_ENV
INSTALL_BWRAP = ("install it with `apt-get install -y bubblewrap` (or `make install` as root), or point "
                 f"{bwrap.BWRAP_ENV} at a bubblewrap binary")
PROBE = "import sys; sys.path[:0] = sys.argv[1:]; import frames; print(open('/proc/self/statm').read().split()[0])"
__all__ = ["FULL", "FULL_V2", "NO_CGROUP", "NO_CGROUP_ENV", "WHOLE", "Boundary", "BoundaryUnavailable", "plan"]


class BoundaryUnavailable(RuntimeError):
    """The operating-system boundary cannot be set up here, and weakening it was not allowed."""


def weak_allowed(allow_weak: bool = False) -> bool:
    return allow_weak or os.environ.get(WEAK_ENV, "") not in ("", "0")


def is_whole(name: str) -> bool:
    return name in WHOLE


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str | None, int]:
    """(why bubblewrap cannot run the sandbox here or None, the runtime's address space in bytes once numpy is
    imported: the base of its RLIMIT_AS, since the sandbox has no ``/proc`` to read it from); tried once."""
    exe = bwrap.find()
    if exe is None and os.environ.get(bwrap.BWRAP_ENV):
        return f"{bwrap.BWRAP_ENV} names no executable file; point it at a bubblewrap binary, or unset it", 0
    if exe is None:
        return f"no bubblewrap (`bwrap` is not on PATH); {INSTALL_BWRAP}", 0
    lease = None
    try:
        lease = uids.lease_uid()
        uid = lease.uid if lease is not None else None
        if uid is not None:
            bwrap.prepare_stage()
        inside, _ = bwrap.interpreter()
        spec = bwrap.launch(exe, _mounts(()), [inside, "-I", "-S", "-c", PROBE, "/sandbox/runtime", "/sandbox/site"],
                            None, None, uid, *_libraries_inside())
        argv = list(spec.argv)
        at = argv.index("--remount-ro")
        argv[at:at] = ["--proc", "/proc"]  # the probe alone (trusted code) reads its own statm
        done = subprocess.run(argv, capture_output=True, timeout=60, env=spec.env, preexec_fn=spec.preexec, cwd="/")
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return f"bubblewrap did not run ({type(err).__name__}: {err})", 0
    finally:
        if lease is not None:
            lease.release()
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[:300]
        who = f" as uid {uid}" if uid is not None else ""
        return (f"bubblewrap cannot create the sandbox's namespaces{who} here ({why}); unprivileged user "
                "namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces"
                " > 0; on Ubuntu 24.04 an AppArmor profile for bwrap)"), 0
    return None, int(done.stdout.split()[0]) * os.sysconf("SC_PAGE_SIZE")


def missing_parts() -> dict[str, str]:
    """What is missing for a whole boundary, by part (empty: one can be built; the cgroup is not a part)."""
    checks = {"seccomp": seccomp.missing(), "bwrap": _probe()[0]}
    return {part: why for part, why in checks.items() if why}


@dataclass(frozen=True)
class Boundary:
    """The parts in use and the cgroup mode; ``name`` says which boundary (module doc); builds launches."""

    bwrap: bool
    seccomp: bool
    cgroup: CgroupMode = field(default_factory=lambda: CgroupMode(None))
    missing: dict[str, str] = field(default_factory=dict)
    vm_bytes: int = 0  # the runtime's address space with numpy loaded (the probe's)

    @property
    def name(self) -> str:
        if not self.missing:
            return {"v1": FULL, "v2": FULL_V2, "scope": FULL_V2}.get(self.cgroup.kind, NO_CGROUP)
        kept = [p for p in ("bwrap", "seccomp") if getattr(self, p)] + (["cgroup"] if self.cgroup.kind else [])
        return f"weak: {'+'.join(kept) or 'process only'}; missing {', '.join(sorted(self.missing))}"

    def launch(self, files: tuple[Path, ...], seccomp_fd: int | None, enter=None,
               uid: int | None = None) -> bwrap.Launch:
        """How to run the child runtime with ``files`` importable (by their names); ``enter`` joins the cgroup;
        ``uid``: the uid a root harness drops to (the sandbox's lease, ``uids.lease_uid``)."""
        inside, here = bwrap.interpreter()
        if not self.bwrap:
            paths = [str(RUNTIME), *dict.fromkeys(str(p.parent) for p in files), str(_numpy_dirs()[0].parent)]
            return bwrap.Launch([here, "-I", "-S", str(RUNTIME / "serve.py"), *paths], dict(CHILD_ENV), enter)
        tail = [inside, "-I", "-S", "/sandbox/runtime/serve.py", "/sandbox/runtime", "/sandbox/site"]
        keep_resident(files)
        return bwrap.launch(bwrap.find(), _mounts(files), tail, enter, seccomp_fd, uid, *_libraries_inside())


def plan(allow_weak: bool = False) -> Boundary:
    """The boundary this machine gives, or ``BoundaryUnavailable`` (fail closed, module doc)."""
    missing = missing_parts()
    if missing and not weak_allowed(allow_weak):
        parts = "; ".join(f"{part}: {why}" for part, why in sorted(missing.items()))
        raise BoundaryUnavailable(  # one line: the CLI prints it as its `error: ...`
            f"the sandbox for untrusted code cannot be set up, so nothing was run ({parts}). "
            "Run `cachecraft doctor` to see what this machine gives and what to install. To run anyway "
            f"behind a weaker boundary (recorded with every result), pass --allow-weak-sandbox or set {WEAK_ENV}=1.")
    return Boundary(bwrap="bwrap" not in missing, seccomp="seccomp" not in missing, cgroup=detect(),
                    missing=missing, vm_bytes=_probe()[1] if "bwrap" not in missing else 0)


def _mounts(files: tuple[Path, ...]) -> list[tuple[Path, str]]:
    """(host path, path under /sandbox): the interpreter and its standard library, the runtime, numpy,
    ``files`` and the libraries found outside the system's folders (``libraries.PRIVATE``: the interpreter's
    ``libpython`` in its prefix, say); the prefix's other files stay out (its ``bin`` scripts' and build files name
    the host's paths)."""
    mounts = [*_interpreter_mounts(), (RUNTIME, "runtime")]
    mounts += [(folder, f"site/{folder.name}") for folder in _numpy_dirs()]
    mounts += [(Path(path), f"site/{Path(path).name}") for path in files]
    return mounts + [(path, f"{libraries.PRIVATE}/{name}") for name, path in sorted(_libraries().private.items())]


def _stdlib() -> Path:
    return Path(os.__file__).resolve().parent


def _hidden() -> list[Path]:
    """What in the standard library's folder names the host or is never the sandbox's to read: the global
    ``site-packages`` (the host's installed packages), the build's ``config-*`` folder and ``_sysconfigdata*.py``
    (the prefix's path, compiler flags), and the test suite (half the folder's bytes, for ``resident``)."""
    stdlib = _stdlib()
    hidden = [stdlib / "site-packages", stdlib / "test", *stdlib.glob("config-*"), *stdlib.glob("_sysconfigdata*.py")]
    return [path for path in hidden if path.exists()]


def _interpreter_mounts() -> list[tuple[Path, str]]:
    """The executable and the standard library under ``/sandbox/python``, with ``_hidden`` covered by an empty
    folder or file."""
    prefix = Path(os.path.realpath(sys.base_prefix))
    _, here = bwrap.interpreter()
    stdlib = _stdlib()
    rel = f"python/{stdlib.relative_to(prefix)}"
    mounts = [(Path(here), f"python/{Path(here).relative_to(prefix)}"), (stdlib, rel)]
    return mounts + [(_empty(path.is_dir()), f"{rel}/{path.name}") for path in _hidden()]


@functools.lru_cache(maxsize=1)
def _libraries() -> libraries.Libraries:
    """The shared libraries the interpreter, the standard library's extension modules and numpy load (once)."""
    stdlib, numpy_dirs = _stdlib(), _numpy_dirs()
    objects = [Path(bwrap.interpreter()[1]), *sorted(stdlib.glob("lib-dynload/*.so"))]
    objects += sorted(p for folder in numpy_dirs for p in folder.rglob("*.so*") if p.is_file())
    return libraries.resolve(objects, [stdlib, *numpy_dirs])


def _libraries_inside() -> tuple[tuple[tuple[Path, str], ...], str | None]:
    """bwrap.launch's ``system`` (host file, path inside) and ``lib_path`` (``/sandbox/lib`` when it holds any)."""
    found = _libraries()
    lib_path = f"/sandbox/{libraries.PRIVATE}" if found.private else None
    return tuple((path, inside) for inside, path in sorted(found.system.items())), lib_path


_RESIDENT_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _resident() -> resident.Resident:
    """The files every sandbox can read, mapped once to be kept in the page cache (``resident.py``)."""
    found = _libraries()
    tops = [Path(bwrap.interpreter()[1]), _stdlib(), *_numpy_dirs(), *found.system.values(), *found.private.values()]
    return resident.Resident(resident.files_under(tops, set(_hidden())))


def keep_resident(files: tuple[Path, ...]) -> int:
    """Before a sandbox starts: every page it can read in the page cache (the shared set through ``_resident``;
    the runtime's and the layer's few files, which the host may rewrite, read whole); the pages brought in."""
    for path in resident.files_under([RUNTIME, *files], set()):
        path.read_bytes()
    with _RESIDENT_LOCK:  # sandboxes start side by side from threads (the search's population): one set, built once
        return _resident().ensure()


def _empty(folder: bool) -> Path:
    """An empty folder (``bwrap.EMPTY_FOLDER``: a read-only tmpfs of the sandbox's own, dated its start) or an
    empty file (``/dev/null``, whose times are the host device's, as the sandbox's own ``/dev/null``)."""
    return bwrap.EMPTY_FOLDER if folder else Path(os.devnull)


def _numpy_dirs() -> list[Path]:
    """numpy's package folder and the folder of the libraries its wheel bundles (``numpy.libs``)."""
    package = Path(np.__file__).resolve().parent
    libs = package.with_name("numpy.libs")
    return [package, *([libs] if libs.is_dir() else [])]
