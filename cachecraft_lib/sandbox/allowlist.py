"""The system calls the sandbox allows: everything not named here fails (default deny).

Derived by tracing (``strace -f -ff`` around bubblewrap, calls counted from the interpreter's ``execve`` and
from bubblewrap's init after its filter is installed) the child runtime loading numpy, every example
submission (``arena/examples``), the search's seeds and candidates and the arena's tests of submissions and
hooks: 36 distinct calls on x86-64 (glibc 2.36, CPython 3.11, numpy 2). The groups below are those calls
plus a few a numpy scorer may reach on other inputs (``mremap`` for a growing array, ``clock_nanosleep``
for ``time.sleep``, the ``stat`` family's variants), each with why. A name this kernel or architecture does
not know is skipped when the filter is compiled. Calls with a condition (``CONDITIONAL``) are allowed only
with the arguments named there; ``ENOSYS`` lists calls the C library falls back from (``clone3`` ->
``clone``, whose flags can be checked; ``openat2`` -> ``openat``). Everything else is ``EPERM``.

Issue 57's red team took out what reaches past the sandbox's own process: shared futexes (only private ones: two
sandboxes signalled each other through waits on a page both map read-only), page-cache probes (``preadv2`` only
without flags, ``RWF_NOWAIT`` told which pages other sandboxes had read; ``madvise`` only with advice about the
process's own memory, not eviction or read-ahead), the host's huge-page pool (``mmap`` without ``MAP_HUGETLB``),
and the calls that name host facts (``uname``: the kernel;
``statfs``/``fstatfs``: the disk, and the memory through the root tmpfs's size; ``sched_getaffinity``: the CPUs;
``times``: the uptime): numpy's import asks ``uname`` and OpenBLAS the CPUs, so these are ``START_ONLY``, refused
by the run filter the runtime installs once numpy is loaded, before any untrusted code.
"""

from __future__ import annotations

ALLOWED: dict[str, tuple[str, ...]] = {
    # the interpreter starting (bubblewrap installs the filter just before it execs Python; the run filter
    # refuses exec once the runtime is up), leaving, and bubblewrap's init reaping it
    "start and exit": ("execve", "exit", "exit_group", "wait4", "waitid"),
    # memory: the allocator, numpy's buffers, mapped shared libraries (mmap, madvise: CONDITIONAL)
    "memory": ("brk", "munmap", "mremap", "mprotect"),
    # reading the read-only files mounted in (the interpreter, the standard library, numpy, the layer);
    # writes go to the reply pipe and /dev/null (the filesystem is read-only: opens for writing fail there)
    # (preadv2: CONDITIONAL; statfs/fstatfs: START_ONLY)
    "files": ("read", "pread64", "readv", "preadv", "write", "writev", "pwrite64", "openat", "open", "close",
              "close_range", "lseek", "fstat", "stat", "lstat", "newfstatat", "statx", "fstatfs", "statfs",
              "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64", "getdents", "getcwd",
              "dup", "dup2", "dup3"),
    # time: clocks (the vDSO's fallback) and sleeping. No timers (setitimer, alarm, timer_create): a timer's
    # signal runs a handler while the runtime waits for its next request, where no call's CPU limit sees it; not
    # times(): START_ONLY
    "time": ("clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep", "times"),
    # signals within the sandbox (the PID namespace holds nothing else: the harness is not in it)
    "signals": ("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "kill", "tgkill",
                "tkill"),
    # who am I (answers from inside the namespaces; not sysinfo: the host's uptime, load, memory and process
    # count, a channel between sandboxes that nothing the runtime does needs; uname: START_ONLY)
    "identity": ("getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
                 "getresuid", "getresgid", "getpgrp", "getpgid", "getsid", "uname"),
    # threads of the C library and their synchronisation (threads share the address space, so RLIMIT_AS
    # and the CPU accounting see them; new processes are refused: CONDITIONAL's clone; private futexes only:
    # CONDITIONAL; sched_getaffinity: START_ONLY)
    "threads": ("set_robust_list", "set_tid_address", "rseq", "sched_yield", "sched_getaffinity",
                "sched_getparam", "sched_getscheduler", "getcpu", "arch_prctl"),
    # resource limits and usage of this process only (prlimit64 on another process: CONDITIONAL)
    "resources": ("getrlimit", "setrlimit", "getrusage", "getpriority"),
    # randomness for hashing and numpy's generators
    "random": ("getrandom",),
    # installing the runtime's own (stacked, never removable) filter
    "filter": ("seccomp",),
}

# calls allowed only with these arguments: (name, argument index, mask, value): allowed when arg & mask == value
# fcntl: duplicating descriptors and their flags only (no locks, leases, signal owners, pipe sizes, notices)
FCNTL_COMMANDS = {"F_DUPFD": 0, "F_GETFD": 1, "F_SETFD": 2, "F_GETFL": 3, "F_SETFL": 4, "F_DUPFD_CLOEXEC": 1030}
IOCTL_REQUESTS = {"TCGETS": 0x5401, "FIONREAD": 0x541B, "FIONBIO": 0x5421, "FIONCLEX": 0x5450, "FIOCLEX": 0x5451}
PRCTL_OPTIONS = {"PR_GET_DUMPABLE": 3, "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21,
                 "PR_SET_SECCOMP": 22, "PR_SET_NO_NEW_PRIVS": 38, "PR_GET_NO_NEW_PRIVS": 39}
# the runtime makes itself non-dumpable at start (serve.limit_process); the run filter refuses it after, so a method
# cannot make itself dumpable again
PRCTL_START_ONLY = {"PR_SET_DUMPABLE": 4}
# madvise: advice about the process's own memory only (the allocator's DONTNEED/FREE, numpy's HUGEPAGE); not
# PAGEOUT/COLD (evicting shared file pages: a reset of a page-cache channel) nor WILLNEED (read-ahead into it)
MADVISE_ADVICE = {"MADV_NORMAL": 0, "MADV_RANDOM": 1, "MADV_SEQUENTIAL": 2, "MADV_DONTNEED": 4, "MADV_FREE": 8,
                  "MADV_DONTFORK": 10, "MADV_DOFORK": 11, "MADV_HUGEPAGE": 14, "MADV_NOHUGEPAGE": 15,
                  "MADV_DONTDUMP": 16, "MADV_DODUMP": 17}
MAP_HUGETLB = 0x40000  # a page of the host's huge-page pool: one pool for every process, its free count a channel
FUTEX_PRIVATE_FLAG = 128  # a private futex is keyed by the process's own address space: no other process meets it
CLONE_THREAD = 0x00010000
# CLONE_NEWNS ... CLONE_NEWNET and CLONE_NEWTIME: never, not even with CLONE_THREAD
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
CONDITIONAL: tuple[tuple[str, int, int, int], ...] = (
    # terminal queries (Python asks whether stdio is a terminal) and close-on-exec flags: no device control
    *(("ioctl", 1, 0xFFFFFFFF, request) for request in IOCTL_REQUESTS.values()),
    *(("fcntl", 1, 0xFFFFFFFF, command) for command in FCNTL_COMMANDS.values()),
    # no-new-privileges and installing its own filter: nothing that reaches another process (not PR_SET_NAME:
    # the runtime never names itself, and a name of any bytes is what the harness reads in /proc)
    *(("prctl", 0, 0xFFFFFFFF, option) for option in (*PRCTL_OPTIONS.values(), *PRCTL_START_ONLY.values())),
    # limits of this process only (pid 0)
    ("prlimit64", 0, 0xFFFFFFFF, 0),
    # a thread (CLONE_THREAD, no namespace flag); fork/vfork and clone without CLONE_THREAD are refused: without
    # a cgroup the per-process limits (RLIMIT_AS, RLIMIT_CPU) then bound the whole sandbox
    ("clone", 0, CLONE_THREAD | CLONE_NAMESPACES, CLONE_THREAD),
    # futexes of this process only: a shared one (on a file page two sandboxes map) is a channel between them
    ("futex", 1, FUTEX_PRIVATE_FLAG, FUTEX_PRIVATE_FLAG),
    # any mapping but one from the host's huge-page pool (nr_hugepages: shared by every process, so what one sandbox
    # holds another can count by trying; nothing the runtime or numpy does asks for one)
    ("mmap", 3, MAP_HUGETLB, 0),
    # a plain positioned read; RWF_NOWAIT (fails on a page not in the host's page cache) probes other readers
    ("preadv2", 5, 0xFFFFFFFF, 0),
    *(("madvise", 2, 0xFFFFFFFF, advice) for advice in MADVISE_ADVICE.values()),
)
ENOSYS = ("clone3", "openat2")
EXEC = ("execve", "execveat")
# allowed while the interpreter and numpy start (numpy's import asks uname, OpenBLAS the CPUs), refused by the run
# filter before untrusted code: each names a host fact (kernel; disk, and memory through the root tmpfs's size;
# the CPUs; times() counts ticks since the host's boot, which no time namespace shifts)
START_ONLY = ("uname", "statfs", "fstatfs", "sched_getaffinity", "times")


def allowed_names() -> tuple[str, ...]:
    """Every call allowed without a condition, in the order of the groups."""
    return tuple(name for group in ALLOWED.values() for name in group)
