"""The sandbox's system-call filter: default deny, compiled by libseccomp (``pyseccomp``) into BPF for the kernel.

Two filters. ``start`` is the allowlist of ``allowlist.py`` (every other call fails with EPERM, or ENOSYS
where the C library falls back to a call the filter can check); bubblewrap installs it on its init and on
the interpreter before it execs Python. ``run`` refuses ``execve``/``execveat``, further filters (``seccomp``,
``prctl(PR_SET_SECCOMP)``: a filter the method installs could hand its calls to a listener or trap them;
``prctl(PR_SET_DUMPABLE)``: the runtime made itself non-dumpable) and the
calls only the start needs (``START_ONLY``: they name host facts) on top, and is installed by the child itself
once the interpreter and numpy are loaded, before any untrusted code (seccomp filters only stack up, they can
never be removed). Only the native architecture is allowed: a call through another entry point (i386's
``int 0x80``, x32's numbers) kills the process.
"""

from __future__ import annotations

import errno
import functools
import tempfile

from .allowlist import CONDITIONAL, ENOSYS, EXEC, PRCTL_OPTIONS, PRCTL_START_ONLY, START_ONLY, allowed_names


def missing() -> str | None:
    """Why no filter can be built here (None when it can)."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as err:
        return (f"no libseccomp bindings ({type(err).__name__}: {err}); install them with "
                "`pip install pyseccomp` (and the C library: `apt-get install -y libseccomp2`)")
    return None


def _add(flt, action, name: str, *args) -> bool:
    """Add one rule; False for a call this kernel or architecture does not have."""
    try:
        flt.add_rule(action, name, *args)
    except (RuntimeError, ValueError, OSError):
        return False
    return True


@functools.lru_cache(maxsize=2)
def compile_filter(deny_exec: bool) -> bytes:
    """The BPF program of the ``start`` filter (the allowlist), or of the ``run`` filter with ``deny_exec``."""
    import pyseccomp as sc

    if deny_exec:
        flt = sc.SyscallFilter(sc.ALLOW)
        for name in (*EXEC, "seccomp", *START_ONLY):
            _add(flt, sc.ERRNO(errno.EPERM), name)
        for option in (PRCTL_OPTIONS["PR_SET_SECCOMP"], *PRCTL_START_ONLY.values()):
            _add(flt, sc.ERRNO(errno.EPERM), "prctl", sc.Arg(0, sc.EQ, option))
    else:
        flt = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        for name in allowed_names():
            _add(flt, sc.ALLOW, name)
        for name, index, mask, value in CONDITIONAL:
            _add(flt, sc.ALLOW, name, sc.Arg(index, sc.MASKED_EQ, mask, value))
        for name in ENOSYS:
            _add(flt, sc.ERRNO(errno.ENOSYS), name)
    flt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        return f.read()
