"""Which cgroup this machine gives a sandbox: v1, v2 (a delegated folder or a systemd scope), or none.

Tried in that order, once per process; a root harness never gets the scope (``cgroup2``'s doc says why). ``NO_CGROUP_ENV=1`` forces none (CI runs the hostile suite so, to keep
the no-cgroup mode tested where a cgroup exists). Without a cgroup the sandbox is still whole: the seccomp
filter refuses new processes, so the per-process limits (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC) set inside
bound all of it (``boundary``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from . import cgroup, cgroup2

NO_CGROUP_ENV = "CACHECRAFT_SANDBOX_NO_CGROUP"


@dataclass(frozen=True)
class CgroupMode:
    """``kind``: "v1", "v2" (``parent``: the delegated folder), "scope" (systemd-run) or None (``why`` not)."""

    kind: str | None
    parent: Path | None = None
    why: str = ""

    def make(self, memory_bytes: int, max_pids: int) -> cgroup.CGroup | cgroup2.CGroup2 | None:
        """A fresh cgroup for one sandbox (None without one; a scope's is found after the start)."""
        if self.kind == "v1":
            return cgroup.CGroup(memory_bytes, max_pids)
        if self.kind in ("v2", "scope"):
            return cgroup2.CGroup2(self.parent, memory_bytes, max_pids)
        return None


def hierarchy(root: Path = cgroup2.ROOT) -> str:
    """Which cgroup hierarchy this machine mounts, in an organiser's words."""
    if (root / "cgroup.controllers").is_file():
        return f"cgroup v2 (unified) at {root}, controllers: {cgroup2.words_of(root / 'cgroup.controllers')}"
    if (root / "unified" / "cgroup.controllers").is_file():
        return f"cgroup v1 (hybrid: the controllers on v1 hierarchies under {root}, an empty unified tree)"
    return f"cgroup v1 at {root}" if root.is_dir() else "no cgroup file system mounted"


def facts() -> list[str]:
    """What an organiser should know about this machine's cgroups: the hierarchy, where this process is, whether
    that cgroup was delegated, and (not root) the user's systemd manager."""
    found = [hierarchy()]
    own = cgroup2.own_path()
    if own is not None:
        writable = "writable" if os.access(own, os.W_OK) else "not writable"
        delegated = "delegated (Delegate=yes)" if cgroup2.is_delegated(own) else "not delegated"
        found.append(f"this process's cgroup: {own} ({writable}, {delegated})")
    if os.geteuid() == 0:
        found.append("the harness is root: sandboxes run as an unprivileged uid, their cgroup comes from a v1 "
                     "hierarchy or a delegated v2 cgroup")
    elif own is not None:
        session = cgroup2.session_env()
        problem = cgroup2.session_missing(session)
        found.append(f"systemd user manager: {problem or 'reachable'} (XDG_RUNTIME_DIR={session['XDG_RUNTIME_DIR']})")
    return found


def forced_off() -> bool:
    return os.environ.get(NO_CGROUP_ENV, "") not in ("", "0")


@functools.lru_cache(maxsize=1)
def detect() -> CgroupMode:
    """The best cgroup this machine gives, or ``CgroupMode(None, why=...)`` listing why none."""
    if forced_off():
        return CgroupMode(None, why=f"turned off ({NO_CGROUP_ENV}=1)")
    v1 = cgroup.missing()
    if v1 is None:
        return CgroupMode("v1")
    own = cgroup2.own_path()
    v2 = cgroup2.delegated_missing(own)
    if v2 is None:
        return CgroupMode("v2", own)
    scope = cgroup2.scope_missing() if own is not None else "no cgroup v2 hierarchy"
    if scope is None:
        return CgroupMode("scope")
    return CgroupMode(None, why=f"cgroup v1: {v1}; cgroup v2: {v2}; systemd scope: {scope}")
