"""The sandbox's process seen from the parent: start it, send frames, read one reply under a CPU and a wall limit.

The CPU limit counts the sandbox's CPU time (its cgroup's, every process it ran; without a cgroup, the host's
``/proc/<pid>/stat`` of every process of its tree, which cannot grow: the filter refuses new processes),
out of the method's reach: a loaded machine never kills a valid method, a busy loop always is. The wall
limit catches a child blocked without using CPU. Writes are bounded the same way: a child that stops reading
its requests (and burns CPU meanwhile) is killed when the call's CPU or wall limit is spent, never holds
the harness in a write. While it waits the watcher also samples the sandbox (``Watch``): its tasks against the
task cap, in every mode (a cgroup's pids.max refuses the task over the cap; without one RLIMIT_NPROC does,
silently), and without a cgroup its resident memory with its page tables (``VmRSS`` + ``VmPTE``: RLIMIT_AS
does not count page tables, and sparse one-page mappings hold more there than in their pages) against the
memory cap a cgroup would set. Replies are read with ``frames.Reader`` (bounded); whatever goes wrong is a
``Failure`` with a kind, never another exception.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .runtime import frames


class Failure(RuntimeError):
    """The sandboxed code failed or broke a rule: ``kind`` (timeout, memory, crash, protocol, process, ...)."""

    def __init__(self, kind: str, message: str, limit: str | None = None) -> None:
        self.kind, self.message, self.limit = kind, frames.clean_text(message), limit  # limit: "cpu" or "wall" spent
        super().__init__(f"{kind}: {self.message}")


SAMPLE_S = 0.05  # seconds between the watcher's samples while it waits
MEMORY_NEAR = 0.9  # a SIGKILL with the last sample this near the memory cap is read as memory


@dataclass(frozen=True)
class Watch:
    """What the watcher samples while it waits: ``memory_bytes`` of resident memory with page tables (None: a
    cgroup caps it) and ``max_tasks`` (processes and threads; reaching it is refused in every mode)."""

    memory_bytes: int | None = None
    max_tasks: int | None = None


class Process:
    """One sandbox's process tree; ``close`` kills all of it (its process group and its cgroup)."""

    def __init__(self, argv: list[str], cgroup: Any = None, pass_fds: tuple[int, ...] = (),
                 env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None,
                 watch: Watch | None = None) -> None:
        self.cgroup, self._tree, self.watch, self.memory_seen = cgroup, None, watch or Watch(), 0
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env or {}, cwd="/", start_new_session=True, pass_fds=pass_fds,
                                     preexec_fn=preexec)
        os.set_blocking(self.proc.stdin.fileno(), False)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tree(self) -> list[int]:
        """The process and its descendants (fixed once ``settle`` has seen the sandbox loaded)."""
        return self._tree if self._tree is not None else descendants(self.proc.pid)

    def settle(self) -> None:
        """The sandbox is up: its tree can no longer grow (new processes are refused), so keep it."""
        self._tree = descendants(self.proc.pid)

    def cpu_seconds(self) -> float | None:
        if self.cgroup is not None:
            return self.cgroup.cpu_seconds()
        seconds = [s for s in map(proc_cpu_seconds, self.tree()) if s is not None]
        return sum(seconds) if seconds else None  # None: the tree has ended

    def tasks(self) -> int:
        """Processes and threads in the sandbox now."""
        return self.cgroup.n_processes() if self.cgroup is not None else sum(map(proc_threads, self.tree()))

    def signal_all(self, signum: int) -> None:
        """Send ``signum`` to every process of the sandbox (``SIGSTOP``/``SIGCONT`` between calls)."""
        if self.proc.poll() is not None:
            return
        for pid in self.tree():
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def sample(self) -> None:
        """``Failure`` (killed) when the sandbox holds its task cap, or without a cgroup more resident memory
        (page tables included) than its cap."""
        cap = self.watch.max_tasks
        if cap and (tasks := self.tasks()) >= cap:
            self.close()
            raise Failure("process", f"the method held {tasks} processes or threads, the sandbox's cap: a method "
                                     "may not start processes or threads")
        limit = self.watch.memory_bytes
        if limit and self.cgroup is None:
            used = sum(proc_memory(pid) for pid in self.tree())
            self.memory_seen = max(self.memory_seen, used)
            if used > limit:
                self.close()
                raise Failure("memory", f"the sandbox held {used >> 20} MB resident (page tables included), over its "
                                        f"cap of {limit >> 20} MB: killed")

    def send(self, data: bytes, cpu_s: float, wall_s: float) -> None:
        """Write ``data`` within ``cpu_s`` CPU seconds and ``wall_s`` seconds (the call's limits: a child that
        stops reading is killed, ``Failure``), or ``Failure`` for a child that died."""
        fd, view = self.proc.stdin.fileno(), memoryview(data)
        cpu_start, start = self.cpu_seconds(), time.monotonic()
        while view:
            self._within(cpu_s, wall_s, cpu_start, start, "the sandbox did not read its request")
            try:
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:  # a broken pipe: the child ended
                raise self.death() from None
            select.select([], [fd], [], SAMPLE_S)

    def _within(self, cpu_s: float, wall_s: float, cpu_start: float | None, start: float,
                what: str = "no answer") -> float:
        """The seconds left to wait, or ``Failure`` (killed) when the CPU or wall limit is spent; its message has
        ``{}`` where the caller puts the limit in its own terms."""
        self.sample()
        cpu_now = self.cpu_seconds()
        cpu_left = cpu_s - (cpu_now - cpu_start) if None not in (cpu_now, cpu_start) else wall_s
        wall_left = wall_s - (time.monotonic() - start)
        if cpu_left <= 0:
            self.close()
            raise Failure("timeout", what + " within {} s of CPU time: killed", limit="cpu")
        if wall_left <= 0:
            self.close()
            raise Failure("timeout", what + " within {} s: killed", limit="wall")
        return min(cpu_left, wall_left)

    def receive(self, cpu_s: float, wall_s: float, max_payload: int) -> tuple[dict, bytes]:
        """One reply frame within ``cpu_s`` CPU seconds and ``wall_s`` seconds, or ``Failure`` (then killed)."""
        fd, reader = self.proc.stdout.fileno(), frames.Reader(max_payload)
        cpu_start, start = self.cpu_seconds(), time.monotonic()
        while True:
            left = self._within(cpu_s, wall_s, cpu_start, start)
            ready, _, _ = select.select([fd], [], [], max(0.002, min(left, SAMPLE_S)))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                raise self.death()
            try:
                frame = reader.feed(chunk)
            except Exception as err:  # noqa: BLE001 (FrameError, or anything a reader bug raises: never left open)
                self.close()
                reason = err if isinstance(err, frames.FrameError) else type(err).__name__
                raise Failure("protocol", f"malformed reply from the sandbox: {reason}") from None
            if frame is not None:
                return frame

    def death(self) -> Failure:
        """Why the process ended (it has or is about to)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        oom = self.cgroup.oom_kills() if self.cgroup else 0
        self.close()
        limit = self.watch.memory_bytes
        near = self.cgroup is None and limit and self.memory_seen >= MEMORY_NEAR * limit
        if oom or (near and code in (-9, 137)):  # a SIGKILL far from the cap is not memory: e.g. the method's own
            return Failure("memory", f"the sandbox's process was killed (exit code {code}): out of memory")
        return Failure("crash", f"the sandbox's process exited (exit code {code})")

    def close(self) -> None:
        """Kill the process group and its tree (bubblewrap's init kills the rest: it is the PID namespace's
        pid 1), then every process left in the cgroup, and reap."""
        alive = self.proc.poll() is None
        tree = self._tree or (self.tree() if alive else [])
        for pid in tree[1:] if alive else ():  # not after bubblewrap's end: a pid may be reused
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.cgroup is not None:
            self.cgroup.kill()
        _wait_gone(tree[1:])


def _wait_gone(pids: list[int], patience_s: float = 5.0) -> None:
    """Wait until the killed ``pids`` have exited (a process being killed is still listed for a moment)."""
    end = time.monotonic() + patience_s
    for pid in pids:
        while time.monotonic() < end and (fields := _stat(pid)) is not None and fields[0] not in "ZX":
            time.sleep(0.002)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command's name (field 3 first), None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:  # bytes: a process's name may be any bytes (not UTF-8)
            return f.read().rsplit(b")", 1)[1].decode("ascii", "replace").split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it (one pass over ``/proc``)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def proc_threads(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[17]) if fields else 0  # num_threads (field 20)


def proc_memory(pid: int) -> int:
    """Resident bytes of a live process with its page tables (``VmRSS`` + ``VmPTE``; 0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return 0
    kb = [int(line.split()[1]) for line in lines if line.startswith((b"VmRSS:", b"VmPTE:"))]
    return sum(kb) << 10


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process from ``/proc/<pid>/stat`` (None where unreadable)."""
    fields = _stat(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)
