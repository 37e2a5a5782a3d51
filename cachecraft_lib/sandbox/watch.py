"""The sandbox's process seen from the parent: start it, send frames, read one reply under a CPU and a wall limit.

The CPU limit counts the sandbox's CPU time (its cgroup's ``cpuacct.usage``, every process it ran, or
``/proc/<pid>/stat`` without a cgroup), out of the method's reach: a loaded machine never kills a valid
method, a busy loop always is. The wall limit catches a child blocked without using CPU. Replies are read
with ``frames.Reader`` (bounded); whatever goes wrong is a ``Failure`` with a kind, never another exception.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

from .cgroup import CGroup
from .runtime import frames


class Failure(RuntimeError):
    """The sandboxed code failed or broke a rule: ``kind`` (timeout, memory, crash, protocol, process, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, frames.clean_text(message)
        super().__init__(f"{kind}: {self.message}")


class Process:
    """One sandbox's process tree; ``close`` kills all of it (its process group and its cgroup)."""

    def __init__(self, argv: list[str], cgroup: CGroup | None, pass_fds: tuple[int, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.cgroup = cgroup
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env or {}, cwd="/", start_new_session=True, pass_fds=pass_fds,
                                     preexec_fn=cgroup.enter if cgroup else None)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        return self.cgroup.cpu_seconds() if self.cgroup else proc_cpu_seconds(self.proc.pid)

    def send(self, data: bytes) -> None:
        try:
            frames.write_all(self.proc.stdin.fileno(), data)
        except (BrokenPipeError, OSError):
            raise self.death() from None

    def receive(self, cpu_s: float, wall_s: float, max_payload: int,
                on_wall: Callable[[float], Failure | None] | None = None) -> tuple[dict, bytes]:
        """One reply frame within ``cpu_s`` CPU seconds and ``wall_s`` seconds, or ``Failure`` (then killed)."""
        fd, reader = self.proc.stdout.fileno(), frames.Reader(max_payload)
        cpu_start, start = self.cpu_seconds(), time.monotonic()
        while True:
            cpu_now = self.cpu_seconds()
            cpu_left = cpu_s - (cpu_now - cpu_start) if None not in (cpu_now, cpu_start) else wall_s
            wall_left = wall_s - (time.monotonic() - start)
            if cpu_left <= 0:
                self.close()
                raise Failure("timeout", f"no answer within {cpu_s:g} s of CPU time: killed")
            if wall_left <= 0:
                self.close()
                failure = on_wall(wall_s) if on_wall else None
                raise failure or Failure("timeout", f"no answer within {wall_s:g} s: killed")
            ready, _, _ = select.select([fd], [], [], max(0.002, min(cpu_left, wall_left, 0.25)))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                raise self.death()
            try:
                frame = reader.feed(chunk)
            except frames.FrameError as err:
                self.close()
                raise Failure("protocol", f"malformed reply from the sandbox: {err}") from None
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
        if oom or (self.cgroup is None and code in (-9, 137)):
            return Failure("memory", f"the sandbox's process was killed (exit code {code}): out of memory")
        return Failure("crash", f"the sandbox's process exited (exit code {code})")

    def close(self) -> None:
        """Kill the process group, then every process left in the cgroup, and reap."""
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


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process from ``/proc/<pid>/stat`` (None where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)
