"""One sandbox for untrusted code: a long-lived child behind the OS boundary, answering request frames.

The arena's ``MethodSandbox`` and the search's ``Sandbox`` are thin layers on ``Box``: they name the child
layer (a module run by ``runtime/serve.py`` inside the sandbox), build request frames and check replies.
``Box`` owns what both need: the boundary (``boundary.plan``: fails closed), the cgroup where there is one
(memory and tasks of the whole sandbox), the seccomp filters, the per-process limits the runtime sets on
itself (address space, CPU over its life, tasks: without a cgroup they bound the whole sandbox, which is one
process), the CPU limit per request, the wall-clock budget of the whole evaluation (``wall_s``, summed over
the sandbox's life, writes included), the check after every reply that the sandbox still holds only its own
tasks within its memory, and the kill of everything at the end. ``Limits`` (``limits.py``) is the one set of
limits every caller passes.
"""

from __future__ import annotations

import math
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import boundary as boundary_
from . import cgroup2, seccomp, uids
from .limits import WALL_PER_CALL, Limits, WallBudget
from .runtime import frames
from .watch import Failure, Process, Watch

STARTUP_MB = 96  # the interpreter and numpy, on top of the caller's memory cap (cgroup)
MAX_PIDS = 16  # bubblewrap's two processes, the interpreter, and the threads the method tries
RUNTIME_TASKS = {True: 3, False: 1}  # tasks of a loaded sandbox (bwrap or not): bwrap's two, the interpreter
WALL_FACTOR, WALL_MIN_S = 20, 120.0  # per-request wall-clock backstop: max(WALL_MIN_S, WALL_FACTOR * cpu_s)


class Box:
    """A child running ``layer`` (files importable inside the sandbox) under ``limits``."""

    def __init__(self, layer_files: tuple[Path, ...], limits: Limits, budget: WallBudget | None = None) -> None:
        self.files, self.limits = layer_files, limits
        self.budget = budget if budget is not None else WallBudget(limits.wall_s)
        self.process: Process | None = None
        self.lease: uids.UidLease | None = None  # the uid this sandbox runs as outside, its own (root harness)
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
        """Every process of the sandbox (its cgroup's; without one, the child's tree)."""
        if self.process is None:
            return []
        cg = self.process.cgroup
        return cg.pids() if cg is not None else self.process.tree()

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
        self._check_after_cpu()
        self.process = self._spawn()
        run_filter = np.frombuffer(seccomp.compile_filter(deny_exec=True), np.uint8) if self.boundary.seccomp else None
        arrays = {**extra, **({"seccomp": run_filter} if run_filter is not None else {})}
        setup = {**setup, "layer": "child", "seccomp": run_filter is not None, **self._rlimits(text, arrays)}
        self._cpu_mark = None
        self._pending_load = self.send({"setup": setup}, arrays, text, self.limits.load_s, what="loading",
                                       earns=self.limits.load_s)

    def _spawn(self) -> Process:
        """The child behind the boundary, in a fresh cgroup where there is one (``BoundaryUnavailable`` if not)."""
        plan, cg, fd = self.boundary, None, None
        memory, unit = (self.limits.memory_mb + STARTUP_MB) << 20, None
        try:
            cg = plan.cgroup.make(memory, MAX_PIDS)
            if plan.seccomp and plan.bwrap:
                fd = _bpf_fd(seccomp.compile_filter(deny_exec=False))
            enter = cg.enter if cg is not None and plan.cgroup.kind != "scope" else None
            self.lease = uids.lease_uid() if plan.bwrap else None
            spec = plan.launch(self.files, fd, enter, self.lease.uid if self.lease else None)
            argv = spec.argv
            if plan.cgroup.kind == "scope":
                unit, argv = cgroup2.scope_command(argv, memory, MAX_PIDS)
            watch = Watch(memory if cg is None else None, MAX_PIDS)  # a cgroup caps memory itself
            process = Process(argv, cg, (fd,) if fd is not None else (), env=spec.env, preexec=spec.preexec,
                              watch=watch)
            if unit is not None:
                cg.attach(process.proc.pid, unit)
            return process
        except (OSError, ValueError) as err:
            if cg is not None:
                cg.kill()
            self._release_uid()
            raise boundary_.BoundaryUnavailable(
                f"the sandbox could not start: {err}; nothing was run. Run `cachecraft doctor` to see what this "
                "machine gives and what to install or enable.") from err
        finally:
            if fd is not None:
                os.close(fd)

    def _rlimits(self, text: str, arrays: dict[str, np.ndarray]) -> dict:
        """The limits the runtime sets on itself: its address space (the probe's base when the sandbox has no
        /proc, plus the load frame's own bytes, plus ``memory_mb``), its CPU over its whole life (the wall
        budget's seconds: CPU burned between or after calls cannot run on) and its tasks."""
        frame = len(text.encode()) + sum(a.nbytes for a in arrays.values())
        base = self.boundary.vm_bytes + 2 * frame if self.boundary.vm_bytes else 0
        return {"memory_mb": self.limits.memory_mb, "vm_base": base, "max_tasks": MAX_PIDS,
                "cpu_life_s": math.ceil(self.limits.load_s + self.budget.total_s)}

    def loaded(self) -> dict:
        """The second half of ``start``: the load reply's header, once the child has loaded (``Failure`` if not)."""
        reply = self.receive(self._pending_load)
        self.process.settle()
        self._check_load_tasks(RUNTIME_TASKS[self.boundary.bwrap])
        return reply.header

    def _check_load_tasks(self, expected: int) -> None:
        """The baseline is the runtime's own tasks: a process or thread the method left running while loading
        (it would burn CPU between calls, where no call's limit sees it) is refused."""
        self.baseline_pids = expected
        extra = self.process.tasks() - expected
        if extra > 0:
            self.close()
            raise Failure("process", f"loading: the method left {extra} process(es) or thread(s) running; a method "
                                     "may not start processes or threads")

    def request(self, header: dict, arrays: dict[str, np.ndarray] | None = None, text: str = "",
                cpu_s: float | None = None, what: str = "the call") -> Reply:
        """Send one frame, read its ``Reply``; ``Failure`` kills the sandbox."""
        return self.receive(self.send(header, arrays, text, cpu_s, what))

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None, text: str = "",
             cpu_s: float | None = None, what: str = "the call", earns: float | None = None) -> Pending:
        """Send one frame within the call's limits (a child that stops reading is killed); what ``receive``
        needs to read its reply within the rest of them. The call earns the evaluation's wall budget ``earns``
        seconds (default ``WALL_PER_CALL`` x its CPU limit; a load, its load limit)."""
        if self.process is None or not self.process.alive:
            raise Failure("crash", "the sandbox is not running")
        cpu_s = self.limits.timeout_s if cpu_s is None else cpu_s
        self._resume()
        self._check_after_cpu()
        self.budget.earned_s += WALL_PER_CALL * cpu_s if earns is None else earns
        left = self.budget.left_s
        if left <= 0:
            self.close()
            raise self._spent()
        backstop = max(WALL_MIN_S, WALL_FACTOR * cpu_s)
        gap = self._charge_gap(cpu_s, what)
        self._cpu_mark = None  # a call in flight: its CPU is its own, not "after the last reply"
        call = Pending(what, cpu_s, gap, min(backstop, left), left < backstop, time.monotonic(),
                       self.process.cpu_seconds())
        try:
            self.process.send(frames.encode(header, arrays, text.encode()), cpu_s - gap, call.wall_s)
        except Failure as err:
            self.budget.used_s += time.monotonic() - call.start
            raise self._limit_failure(err, call) from None
        except BaseException:  # anything else (a bug, Ctrl-C): the sandbox never runs on unwatched
            self.close()
            raise
        return call

    def receive(self, call: Pending) -> Reply:
        """The ``Reply`` to the frame ``send`` sent; ``Failure`` kills the sandbox."""
        if self.process is None:
            raise Failure("crash", "the sandbox is not running")
        spent = self.process.cpu_seconds()
        spent = spent - call.cpu0 if None not in (spent, call.cpu0) else 0.0
        try:
            reply, body = self.process.receive(call.cpu_s - call.gap - spent,
                                               call.wall_s - (time.monotonic() - call.start), self.limits.max_payload)
            self._pause()
        except Failure as err:
            raise self._limit_failure(err, call) from None
        except BaseException:  # anything else (a bug, Ctrl-C): the sandbox never runs on unwatched
            self.close()
            raise
        finally:
            self.budget.used_s += time.monotonic() - call.start
        cpu1 = self.process.cpu_seconds()
        if None not in (call.cpu0, cpu1):
            self.cpu_used += cpu1 - call.cpu0
        self._cpu_mark = cpu1
        self._check_after(call.what)
        try:
            text_back, arrays_back = frames.decode(reply, body)
        except (ValueError, TypeError) as err:
            self.close()
            raise Failure("protocol", f"malformed reply from the sandbox: {err}") from None
        if type(reply.get("ok")) is not bool:  # callers read ``ok`` as a truth value: ``[0]`` must not pass as true
            self.close()
            raise Failure("protocol", "malformed reply from the sandbox: its 'ok' is not true or false")
        return Reply(reply, text_back, arrays_back)

    def _limit_failure(self, err: Failure, call: Pending) -> Failure:
        """A spent limit said in the call's terms (the whole CPU limit, what went between calls, the budget)."""
        if err.limit == "wall" and call.budget_bound:
            return self._spent()
        if err.limit == "cpu":
            between = f" ({call.gap:.2f} s of it used between calls)" if call.gap > 0.01 else ""
            return Failure("timeout", f"{call.what}: {err.message.replace('{}', f'{call.cpu_s:g}')}{between}")
        if err.limit == "wall":
            return Failure("timeout", f"{call.what}: {err.message.replace('{}', f'{call.wall_s:g}')}")
        return err

    def _charge_gap(self, cpu_s: float, what: str) -> float:
        """CPU the sandbox used since its last reply (nothing of it should run then), charged to this call."""
        gap = self._gap()
        self.cpu_used += gap
        if gap >= cpu_s:
            self.close()
            raise Failure("timeout", f"{what}: the sandbox used {gap:.2f} s of CPU between calls, more than the "
                                     f"{cpu_s:g} s a call may use: killed")
        return gap

    def _gap(self) -> float:
        now = self.process.cpu_seconds() if self.process is not None else None
        return now - self._cpu_mark if None not in (now, self._cpu_mark) else 0.0

    def _spent(self) -> Failure:
        budget = self.budget
        earned = "" if budget.allowed_s >= budget.total_s else (
            f" (what its {self.limits.load_s:g} s per start and {WALL_PER_CALL:g} x each call's CPU limit earned so "
            f"far; at most {budget.total_s:g} s)")
        return Failure("timeout", f"the evaluation's wall-clock budget of {budget.allowed_s:g} s is spent{earned}: "
                                  "killed")

    def _pause(self) -> None:
        """Stop the sandbox once it has replied (SIGSTOP to its processes): nothing of it runs between calls or
        after the last one, where no call's CPU limit sees it (a thread or a signal handler set off after the
        reply); ``send`` continues it."""
        if self.process is not None:
            self.process.signal_all(signal.SIGSTOP)

    def _resume(self) -> None:
        if self.process is not None:
            self.process.signal_all(signal.SIGCONT)

    def _check_after_cpu(self) -> None:
        """Refuse the evaluation once its sandboxes used more CPU after their last replies (charged at ``close``)
        than one call may use, as a call over its CPU limit is."""
        after = self.budget.cpu_after_s
        if after >= self.limits.timeout_s:
            self.close()
            raise Failure("timeout", f"the evaluation's sandboxes used {after:.2f} s of CPU after their last replies, "
                                     f"more than the {self.limits.timeout_s:g} s a call may use: killed")

    def _check_after(self, what: str) -> None:
        """Refuse a sandbox that hit its memory cap or left tasks behind (a thread still running after its reply
        would burn CPU between calls)."""
        cg = self.process.cgroup
        if cg is not None and cg.oom_kills():
            self.close()
            raise Failure("memory", f"{what}: the sandbox hit its memory cap of {self.limits.memory_mb} MB "
                                    "(the kernel killed one of its processes)")
        extra = self.process.tasks() - self.baseline_pids if self.baseline_pids else 0
        if extra > 0 or (cg is not None and cg.pid_limit_hits()):
            self.close()
            raise Failure("process", f"{what}: the method started processes or threads ({max(extra, 0)} still "
                                     "running; a method may not start processes or threads)")

    def close(self) -> None:
        """Kill the sandbox; CPU it burned after its last reply is charged first (``cpu_used``, and the
        evaluation's ``cpu_after_s``, which its next sandbox or call is refused on: ``_check_after_cpu``)."""
        if self.process is not None:
            gap = max(self._gap(), 0.0)
            self.cpu_used += gap
            self.budget.cpu_after_s += gap
            self.process.close()
            self.process = None
        self._release_uid()

    def _release_uid(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None


@dataclass
class Pending:
    """One call between ``send`` and ``receive``: its CPU limit (``gap`` of it used before the call, between
    calls), its wall limit (``budget_bound``: the evaluation's budget, not the call's backstop, set it), when it
    started and the sandbox's CPU then."""

    what: str
    cpu_s: float
    gap: float
    wall_s: float
    budget_bound: bool
    start: float
    cpu0: float | None


@dataclass(frozen=True)
class Reply:
    """One call's answer by name (its header says ``ok`` or why not), so no caller unpacks it by position."""

    header: dict
    text: str
    arrays: dict[str, np.ndarray]


def _bpf_fd(program: bytes) -> int:
    """A readable descriptor of ``program`` at offset 0 (bubblewrap reads the filter from it)."""
    f = tempfile.TemporaryFile()
    f.write(program)
    f.flush()
    fd = os.dup(f.fileno())
    f.close()
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
