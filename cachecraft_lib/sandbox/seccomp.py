"""The sandbox's system-call filter, compiled by libseccomp (``pyseccomp``) into BPF for the kernel.

Two filters: ``start`` (everything a scorer never needs: debugging other processes, reading their memory,
namespaces, mounts, sockets, kernel modules, keyrings, BPF, changing files' owners, modes and times, ...) is given to bubblewrap, which installs it
before it starts the interpreter; ``run`` adds ``execve``/``execveat`` and is installed by the child itself
once the interpreter runs, before any untrusted code (seccomp filters only stack up, they can never be
removed). A denied call fails with EPERM (the method sees ``PermissionError``), an unknown architecture
is killed. ``clone3`` answers ENOSYS so that the C library falls back to ``clone``, whose flags are checked.
"""

from __future__ import annotations

import errno
import functools
import tempfile

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "pidfd_open",
    "kcmp", "setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "socket", "socketpair", "bpf",
    "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "settimeofday",
    "clock_settime", "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm", "quotactl", "nfsservctl",
    "lookup_dcookie", "name_to_handle_at", "open_by_handle_at", "personality", "vhangup", "syslog",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init", "mbind", "migrate_pages",
    "move_pages", "set_mempolicy",
    # file metadata: /dev's nodes are the host's (root's, seen as the sandbox's own when run as root)
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "mknod", "mknodat",
)
EXEC = ("execve", "execveat")
# clone flags that make a new namespace (CLONE_NEWNS ... CLONE_NEWNET, CLONE_NEWTIME)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                   0x00000080)


def missing() -> str | None:
    """Why no filter can be built here (None when it can)."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as err:
        return (f"no libseccomp bindings ({type(err).__name__}: {err}); install them with "
                "`pip install pyseccomp` (and the C library: `apt-get install -y libseccomp2`)")
    return None


@functools.lru_cache(maxsize=2)
def compile_filter(deny_exec: bool) -> bytes:
    """The BPF program of the ``start`` filter, or of the ``run`` filter with ``deny_exec``."""
    import pyseccomp as sc

    flt = sc.SyscallFilter(sc.ALLOW)
    refuse = sc.ERRNO(errno.EPERM)
    for name in DENIED + (EXEC if deny_exec else ()):
        try:
            flt.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):  # a call this kernel/architecture does not have
            continue
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in NAMESPACE_FLAGS:
        flt.add_rule(refuse, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        return f.read()
