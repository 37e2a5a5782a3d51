"""The child's side of the sandbox: harden the process, load the untrusted code, answer request frames.

Run inside the boundary as ``python -I -S serve.py PATH...`` (the paths are put first on ``sys.path``:
this folder, numpy's and the layer's files). It reads the setup frame, caps its own address space (RLIMIT_AS), its
CPU over its whole life (RLIMIT_CPU), its tasks (RLIMIT_NPROC), descriptors (RLIMIT_NOFILE) and what it may take
of its uid's per-user quotas (pending signals, message queues, locked memory: ``PER_USER``): the filter
refuses new processes, so without a cgroup these bound the whole sandbox. Then it imports the layer (the arena's
or the search's ``child``), lets it load what it needs (numpy), installs the seccomp run filter the setup frame
carries (no ``execve``, no calls naming host facts from here on; filters cannot be removed), installs the audit
reporter (``guard``) and loads the untrusted source. Then one reply per
request. The layer defines ``ALLOWED`` (imports), ``prepare()``, ``load(text, setup)``, ``handle(state,
header, arrays) -> (header, arrays)`` and ``classify(err, loading) -> (kind, text)``.
"""

from __future__ import annotations

import importlib
import os
import resource
import sys

if __name__ == "__main__":
    sys.path[:0] = sys.argv[1:]

import frames  # noqa: E402
import guard  # noqa: E402


def install_filter(program: bytes) -> None:
    """Install a compiled seccomp BPF program on this process (after ``no_new_privs``, as the kernel asks)."""
    import ctypes

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    n = len(program) // ctypes.sizeof(SockFilter)
    table = (SockFilter * n).from_buffer_copy(program)
    prog = SockFprog(n, ctypes.cast(table, ctypes.POINTER(SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "the seccomp filter could not be installed")


def limit_memory(extra_mb: int, base: int = 0) -> None:
    """Cap the address space at what is mapped now (``/proc/self/statm``; behind bubblewrap there is no
    ``/proc``, and the parent's ``base`` says it) plus ``extra_mb``: a big allocation is a MemoryError."""
    try:
        with open("/proc/self/statm") as f:
            base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        if base <= 0:
            raise
    limit = base + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# Limits the kernel counts per user (whatever else runs as the uid shares the count): small, so the sandbox takes
# little of its uid's share (a root harness gives each sandbox a uid of its own; another user's sandboxes run as
# that user). Pending signals: none are needed, one method queued 96,367; message queues and locked memory: none.
PR_SET_DUMPABLE = 4
PER_USER = {"RLIMIT_SIGPENDING": 16, "RLIMIT_MSGQUEUE": 0, "RLIMIT_MEMLOCK": 0}


def limit_process(setup: dict) -> None:
    """CPU seconds over the whole life, tasks and descriptors of this process, the per-user limits (``PER_USER``);
    no core files, and not dumpable: RLIMIT_CORE does not stop a piped ``core_pattern`` helper (systemd-coredump,
    apport) from receiving the process's memory, test inputs included, and a non-dumpable process's memory is not
    readable by other processes of its uid (``/proc/<pid>/mem``). The filter allows only ``PR_GET_DUMPABLE``, so
    the method cannot undo it."""
    import ctypes

    cpu = int(setup.get("cpu_life_s", 0))
    if cpu > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    tasks = int(setup.get("max_tasks", 0))
    if tasks > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
    for name, value in PER_USER.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the process could not be made non-dumpable")


def reply(fd: int, header: dict, arrays: dict | None = None) -> None:
    if "error" in header:
        header = {**header, "error": frames.clean_text(header["error"])}
    frames.write_all(fd, frames.encode(header, arrays))


def main() -> None:
    stdin = os.fdopen(os.dup(0), "rb")
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the method's prints go nowhere
    first = frames.read_blocking(stdin)
    if first is None:
        return
    text, arrays = frames.decode(*first)
    setup = first[0]["setup"]
    try:
        limit_memory(int(setup["memory_mb"]), int(setup.get("vm_base", 0)))
        limit_process(setup)
        layer = importlib.import_module(setup["layer"])
        layer.prepare()  # numpy and the allowed modules: trusted, read-only; numpy's import asks uname
        if setup.get("seccomp"):  # before any untrusted code (one thread: more would be refused after loading)
            install_filter(arrays["seccomp"].tobytes())
    except BaseException as err:  # noqa: BLE001 - the parent must hear why the sandbox is not ready
        reply(out, {"ok": False, "kind": "boundary", "error": f"the sandbox could not be set up: {err!r}"})
        return
    guard.install(layer.ALLOWED)
    given = {k: v for k, v in arrays.items() if k != "seccomp"}
    try:
        state = layer.load(text, setup, given) if getattr(layer, "LOADS_ARRAYS", False) else layer.load(text, setup)
    except BaseException as err:  # noqa: BLE001 - anything the code raises while loading is its failure
        kind, why = guard.refusal() or layer.classify(err, loading=True)
        reply(out, {"ok": False, "kind": kind, "error": f"loading: {why}"})
        return
    reply(out, {"ok": True, "kind": "loaded"})
    while (frame := frames.read_blocking(stdin)) is not None:
        header, arrays = frame[0], frames.decode(*frame)[1]
        try:
            answer, answer_arrays = layer.handle(state, header, arrays)
        except BaseException as err:  # noqa: BLE001
            kind, why = guard.refusal() or layer.classify(err, loading=False)
            reply(out, {"ok": False, "kind": kind, "error": why})
            continue
        refused = guard.refusal()
        if refused:
            reply(out, {"ok": False, "kind": refused[0], "error": refused[1]})
        else:
            reply(out, answer, answer_arrays)


if __name__ == "__main__":
    main()
