"""One sandbox for untrusted code: a long-lived child behind the OS boundary, answering request frames.

The arena's ``MethodSandbox`` and the search's ``Sandbox`` are thin layers on ``Box``: they name the child
layer (a module run by ``runtime/serve.py`` inside the sandbox), build request frames and check replies.
``Box`` owns what both need: the boundary (``boundary.plan``: fails closed), the cgroup (memory and
processes of the whole sandbox), the seccomp filters, the CPU limit per request, the wall-clock budget of
the whole evaluation (``wall_s``, summed over the sandbox's life), the check after every reply that the
sandbox is still one process within its memory, and the kill of everything at the end.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import boundary as boundary_
from . import seccomp
from .cgroup import CGroup
from .runtime import frames
from .watch import Failure, Process

STARTUP_MB = 96  # the interpreter and numpy, on top of the caller's memory cap (cgroup)
MAX_PIDS = 16  # bubblewrap's two processes, the interpreter, and the forks the method tries
RUNTIME_TASKS = {True: 3, False: 1}  # tasks of a loaded sandbox (bwrap or not): bwrap's two, the interpreter
WALL_FACTOR, WALL_MIN_S = 20, 120.0  # per-request wall-clock backstop: max(WALL_MIN_S, WALL_FACTOR * cpu_s)


@dataclass
class WallBudget:
    """Wall-clock seconds of one evaluation, shared by every sandbox it opens (the arena opens one per context):
    a fresh sandbox must not mean a fresh budget."""

    total_s: float
    used_s: float = 0.0


@dataclass(frozen=True)
class BoxLimits:
    """CPU seconds per request, memory (MB beyond the start), seconds to load, wall seconds per evaluation."""

    cpu_s: float = 10.0
    memory_mb: int = 1024
    load_s: float = 30.0
    wall_s: float = 3600.0
    allow_weak: bool = False
    max_payload: int = 64 << 20  # bytes of one reply (an answer is a few MB at most)


class Box:
    """A child running ``layer`` (files importable inside the sandbox) under ``limits``."""

    def __init__(self, layer_files: tuple[Path, ...], limits: BoxLimits, budget: WallBudget | None = None) -> None:
        self.files, self.limits = layer_files, limits
        self.budget = budget if budget is not None else WallBudget(limits.wall_s)
        self.process: Process | None = None
        self.cpu_used, self.baseline_pids = 0.0, 0
        self._cpu_mark: float | None = None  # the sandbox's CPU at the end of the last reply
        self.boundary = boundary_.plan(limits.allow_weak)  # BoundaryUnavailable: nothing runs

    @property
    def wall_used(self) -> float:
        return self.budget.used_s

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive

    def pids(self) -> list[int]:
        """Every process of the sandbox (its cgroup's; without one, the child's)."""
        if self.process is None:
            return []
        cg = self.process.cgroup
        return cg.pids() if cg is not None else [self.process.proc.pid]

    @property
    def boundary_name(self) -> str:
        return self.boundary.name

    def start(self, setup: dict, text: str, arrays: dict[str, np.ndarray] | None = None) -> dict:
        """Start the child and load ``text`` with ``setup`` (and read-only ``arrays`` for the layer's ``load``, e.g.
        a submission's parameters); the load reply's header (``Failure`` otherwise)."""
        self.launch(setup, text, arrays)
        return self.loaded()

    def launch(self, setup: dict, text: str, arrays: dict[str, np.ndarray] | None = None) -> None:
        """The first half of ``start``: start the child and send it the load frame, without waiting for it (so
        several sandboxes load side by side; ``loaded`` waits). Call it from the thread that will use the
        sandbox: bubblewrap's --die-with-parent follows the thread that started it."""
        extra = dict(arrays or {})
        self.close()
        plan, cg, fd = self.boundary, None, None
        try:
            if plan.cgroup:
                cg = CGroup((self.limits.memory_mb + STARTUP_MB) << 20, MAX_PIDS)
            if plan.seccomp and plan.bwrap:
                fd = _bpf_fd(seccomp.compile_filter(deny_exec=False))
            argv = plan.command(self.files, fd)
            self.process = Process(argv, cg, (fd,) if fd is not None else (), env=dict(boundary_.CHILD_ENV))
        except OSError as err:
            if cg is not None:
                cg.kill()
            raise boundary_.BoundaryUnavailable(f"the sandbox could not start: {err}") from err
        finally:
            if fd is not None:
                os.close(fd)
        run_filter = np.frombuffer(seccomp.compile_filter(deny_exec=True), np.uint8) if plan.seccomp else None
        setup = {**setup, "layer": "child", "memory_mb": self.limits.memory_mb, "seccomp": run_filter is not None}
        arrays = {**extra, **({"seccomp": run_filter} if run_filter is not None else {})}
        self._cpu_mark = None
        self._pending_load = self.send({"setup": setup}, arrays, text, self.limits.load_s, what="loading")

    def loaded(self) -> dict:
        """The second half of ``start``: the load reply's header, once the child has loaded (``Failure`` if not)."""
        header, _, _ = self.receive(self._pending_load)
        cg = self.process.cgroup
        if cg is not None:
            self._check_load_tasks(cg, RUNTIME_TASKS[self.boundary.bwrap])
        return header

    def _check_load_tasks(self, cg: CGroup, expected: int) -> None:
        """The baseline is the runtime's own tasks: a process or thread the method left running while loading
        (it would burn CPU between calls, where no call's limit sees it) is refused."""
        self.baseline_pids = expected
        extra = cg.n_processes() - expected
        if extra > 0:
            self.close()
            raise Failure("process", f"loading: the method left {extra} process(es) or thread(s) running; a method "
                                     "may not start processes or threads")

    def request(self, header: dict, arrays: dict[str, np.ndarray] | None = None, text: str = "",
                cpu_s: float | None = None, what: str = "the call") -> tuple[dict, str, dict[str, np.ndarray]]:
        """Send one frame, read the reply (header, text, arrays); ``Failure`` kills the sandbox."""
        return self.receive(self.send(header, arrays, text, cpu_s, what))

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None, text: str = "",
             cpu_s: float | None = None, what: str = "the call") -> tuple:
        """Send one frame; what ``receive`` needs to read its reply within the call's limits."""
        if self.process is None or not self.process.alive:
            raise Failure("crash", "the sandbox is not running")
        cpu_s = self.limits.cpu_s if cpu_s is None else cpu_s
        left = self.budget.total_s - self.budget.used_s
        if left <= 0:
            self.close()
            raise self._spent()
        backstop = max(WALL_MIN_S, WALL_FACTOR * cpu_s)
        cpu_s -= self._charge_gap(cpu_s, what)
        self.process.send(frames.encode(header, arrays, text.encode()))
        return cpu_s, backstop, left, what, time.monotonic(), self.process.cpu_seconds()

    def receive(self, pending: tuple) -> tuple[dict, str, dict[str, np.ndarray]]:
        """The reply to the frame ``send`` sent (header, text, arrays); ``Failure`` kills the sandbox."""
        cpu_s, backstop, left, what, start, cpu0 = pending
        if self.process is None:
            raise Failure("crash", "the sandbox is not running")
        try:
            reply, body = self.process.receive(cpu_s, min(backstop, left), self.limits.max_payload,
                                               on_wall=lambda s: self._spent() if s < backstop else None)
        finally:
            self.budget.used_s += time.monotonic() - start
        cpu1 = self.process.cpu_seconds()
        if None not in (cpu0, cpu1):
            self.cpu_used += cpu1 - cpu0
        self._cpu_mark = cpu1
        self._check_after(what)
        try:
            text_back, arrays_back = frames.decode(reply, body)
        except (ValueError, TypeError) as err:
            self.close()
            raise Failure("protocol", f"malformed reply from the sandbox: {err}") from None
        return reply, text_back, arrays_back

    def _charge_gap(self, cpu_s: float, what: str) -> float:
        """CPU the sandbox used since its last reply (nothing of it should run then), charged to this call."""
        now = self.process.cpu_seconds()
        gap = now - self._cpu_mark if None not in (now, self._cpu_mark) else 0.0
        self.cpu_used += gap
        if gap >= cpu_s:
            self.close()
            raise Failure("timeout", f"{what}: the sandbox used {gap:.2f} s of CPU between calls, more than the "
                                     f"{cpu_s:g} s a call may use: killed")
        return gap

    def _spent(self) -> Failure:
        return Failure("timeout", f"the evaluation's wall-clock budget of {self.budget.total_s:g} s is spent: killed")

    def _check_after(self, what: str) -> None:
        """Refuse a sandbox that hit its memory cap or left processes behind (cgroup only)."""
        cg = self.process.cgroup
        if cg is None:
            return
        if cg.oom_kills():
            self.close()
            raise Failure("memory", f"{what}: the sandbox hit its memory cap of {self.limits.memory_mb} MB "
                                    "(the kernel killed one of its processes)")
        extra = cg.n_processes() - self.baseline_pids if self.baseline_pids else 0
        if extra > 0 or cg.pid_limit_hits():
            self.close()
            raise Failure("process", f"{what}: the method started processes ({max(extra, 0)} still running; "
                                     "a method may not start processes)")

    def close(self) -> None:
        if self.process is not None:
            self.process.close()
            self.process = None


def _bpf_fd(program: bytes) -> int:
    """A readable descriptor of ``program`` at offset 0 (bubblewrap reads the filter from it)."""
    f = tempfile.TemporaryFile()
    f.write(program)
    f.flush()
    fd = os.dup(f.fileno())
    f.close()
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
