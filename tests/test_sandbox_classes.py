"""The classes issue 57's red team got through the OS boundary, each tried by a hostile method and closed: a channel
between sandboxes (shared futexes), page-cache probing, host facts, CPU after the last reply, memory held in page
tables and a self-kill read as "memory" without a cgroup, the thread cap in every mode, a uid shared with the host
and other sandboxes, and a missing boundary reported as a traceback. The no-cgroup mode is forced here
(the ``mode`` fixture) where a test is about it, so these run in every mode, not only under CI's variable."""

from __future__ import annotations

import ast
import errno
import hashlib
import os
import platform
import time
from pathlib import Path

import pytest
from sandbox_helpers import (
    SCALARS,
    alarm_runtime,
    cgroup_names,
    layer_arrays,
    method_box,
    processes_in,
    scaled,
)

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.sandbox import Limits, WallBudget, boundary, box, uids
from cachecraft_lib.sandbox.cgroup_mode import CgroupMode

X86_64 = platform.machine() == "x86_64"
MODES = ["this machine's", "no cgroup"]
# (x86-64 number, arguments): each answers something other than EPERM without the filter
SHARED_FUTEX = {"futex_wake_shared": (202, 0, 1, 1), "futex_wait_shared": (202, 0, 0, 0), "futex_waitv": (449, 0, 1),
                "futex_wake": (454, 0, 0, 1, 0), "futex_wait": (455, 0, 0, 0, 0), "futex_requeue": (456, 0, 0, 1, 1)}
PAGE_CACHE = {"preadv2_nowait": (327, 0, 0, 0, 0, 0, 8), "preadv2_hipri": (327, 0, 0, 0, 0, 0, 1),
              "pwritev2": (328, 1, 0, 0, 0, 0, 0), "madvise_pageout": (28, 0, 4096, 21),
              "madvise_cold": (28, 0, 4096, 20), "madvise_willneed": (28, 0, 4096, 3), "mincore": (27, 0, 4096, 0),
              "cachestat": (451, 0, 0, 0, 0), "readahead": (187, 0, 0, 4096), "fadvise64": (221, 0, 0, 4096, 4)}
# a mapping from the host's huge-page pool (its free count, shared by every process, is a channel): mmap(0, 2 MB,
# PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0); ENOMEM without the filter where the
# pool is empty
HUGE_PAGES = {"mmap_hugetlb": (9, 0, 2 << 20, 3, 0x2 | 0x20 | 0x40000, -1, 0)}
HOST_FACTS = {"uname": (63, 0), "statfs": (137, 0, 0), "fstatfs": (138, 0, 0), "sched_getaffinity": (204, 0, 128, 0),
              "times": (100, 0)}
STILL_ALLOWED = {"futex_wake_private": (202, 0, 1 | 128, 1), "preadv2_plain": (327, 0, 0, 0, 0, 0, 0),
                 "madvise_dontneed": (28, 0, 0, 4), "mmap_plain": (9, 0, 4096, 3, 0x2 | 0x20, -1, 0),
                 # allowed, and answers 0: the runtime made itself non-dumpable before loading the method
                 "prctl_get_dumpable": (157, 3)}


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """This machine's mode, then the "whole, no cgroup" one forced (as CACHECRAFT_SANDBOX_NO_CGROUP=1 does)."""
    if request.param == "no cgroup":
        monkeypatch.setattr(boundary, "detect", lambda: CgroupMode(None, why="turned off by the test"))
    return request.param


def refusal(sandbox, calls: int = 1) -> SubmissionError:
    trace = None
    with pytest.raises(SubmissionError) as err:
        with sandbox:
            trace = cgroup_names(sandbox)
            for _ in range(calls):
                sandbox.call(layer_arrays(), **SCALARS)
    assert trace is not None, f"refused before it started: {err.value}"
    assert not processes_in(trace), "a process of the sandbox survived it"
    return err.value


def reported(err: SubmissionError, marker: str) -> dict:
    assert marker in str(err), str(err)
    return ast.literal_eval(str(err).split(marker + " ", 1)[1].split(" (")[0].rstrip())


# ------------------------------------------------------------------ the system calls (classes 1, 2 and 6)
@pytest.mark.skipif(not X86_64, reason="the system-call numbers are x86-64's")
def test_shared_futexes_page_cache_probes_and_host_facts_are_refused(tmp_path):
    """Shared futexes (a channel between sandboxes through a page they both map), page-cache probes (RWF_NOWAIT,
    mincore, cachestat, eviction advice, readahead: a count kept in the host's cache across fresh sandboxes) and
    calls naming host facts (kernel, disk and memory through a filesystem's size, the CPUs) and a mapping from the
    host's huge-page pool answer EPERM; the private futex, a plain preadv2, the allocator's madvise and a plain
    mapping still work."""
    calls = {**SHARED_FUTEX, **PAGE_CACHE, **HUGE_PAGES, **HOST_FACTS}
    seen = reported(refusal(method_box(tmp_path, "arena_syscalls", calls={**calls, **STILL_ALLOWED})), "ERRNOS")
    assert {name: seen[name] for name in calls} == dict.fromkeys(calls, errno.EPERM)
    assert {name: seen[name] for name in STILL_ALLOWED if name != "mmap_plain"} == dict.fromkeys(
        set(STILL_ALLOWED) - {"mmap_plain"}, "returned 0")
    assert str(seen["mmap_plain"]).startswith("returned ") and seen["mmap_plain"] != "returned -1"


def test_a_method_learns_no_host_facts(tmp_path):
    """The kernel (uname), the disk and memory (a filesystem's size: the root tmpfs is half the host's memory), the
    CPUs (affinity) are refused; run by root the clocks a vDSO answers start at the sandbox's own start (a time
    namespace), not at the host's boot."""
    start = time.monotonic()
    facts = reported(refusal(method_box(tmp_path, "arena_host_facts")), "FACTS")
    took = time.monotonic() - start
    refused = f"refused {errno.EPERM}"
    assert {k: facts[k] for k in ("kernel", "root_fs", "python_fs", "cpus")} == dict.fromkeys(
        ("kernel", "root_fs", "python_fs", "cpus"), refused), facts
    if os.geteuid() == 0:  # a time namespace needs CAP_SYS_TIME
        assert facts["boottime"] < took + 2 and facts["monotonic"] < took + 2, (facts, took)


# ------------------------------------------------------------------- CPU after the last reply (class 4)
def test_nothing_runs_between_calls_or_after_the_last_reply(tmp_path):
    """The sandbox is stopped once it has replied: a handler set off after the reply (by a signal from outside:
    the sandbox may set no timer) burns nothing until the next call, which it is charged to."""
    sandbox = method_box(tmp_path, "arena_cpu_between_calls", Limits(timeout_s=1.0, memory_mb=256), seconds=3.0)
    with pytest.raises(SubmissionError) as err:
        with sandbox:
            trace = cgroup_names(sandbox)
            sandbox.call(layer_arrays(), **SCALARS)
            before = sandbox._box.process.cpu_seconds()
            alarm_runtime(sandbox)
            time.sleep(1.5)  # the handler would burn 1.5 s here, while the harness does its own work
            assert sandbox._box.process.cpu_seconds() - before < 0.3
            sandbox.call(layer_arrays(), **SCALARS)
    assert err.value.kind == "timeout" and "1 s of CPU time" in str(err.value) and sandbox.calls == 1
    assert not processes_in(trace)


def test_cpu_after_the_last_reply_is_charged_to_the_evaluation_and_refused(tmp_path, monkeypatch):
    """Were anything to run after a sandbox's last reply (the stop above switched off), ``close`` charges it to the
    evaluation's budget, and the evaluation's next sandbox is refused as a call over its CPU limit would be."""
    monkeypatch.setattr(box.Box, "_pause", lambda self: None, raising=False)
    limits, budget = Limits(timeout_s=1.0, memory_mb=256), WallBudget(600.0)
    first = method_box(tmp_path / "a", "arena_cpu_between_calls", limits, seconds=1.5)
    first.budget = first._box.budget = budget
    with first:
        first.call(layer_arrays(), **SCALARS)
        alarm_runtime(first)
        end = time.monotonic() + 120
        while first._box._gap() < 1.2 and time.monotonic() < end:  # waits on state: the handler has burned
            time.sleep(0.05)
    assert getattr(budget, "cpu_after_s", 0.0) >= 1.0, budget
    second = method_box(tmp_path / "b", "arena_escape_guard", limits, target="/x")
    second.budget = second._box.budget = budget
    with pytest.raises(SubmissionError) as err:
        second.start()
    assert err.value.kind == "timeout" and "after their last replies" in str(err.value)


# ------------------------------------------------------------ the wall budget sized by the board (class 7)
def test_the_wall_budget_is_what_the_evaluations_starts_and_calls_earn(tmp_path):
    """A method sleeping 1 s per call, under the call's backstop (120 s) and the evaluation's cap (an hour): each
    call earns 4 x its CPU limit (0.4 s here) and each start its load limit (1 s), so it is refused within a few
    calls, not after the hour; an honest call uses a fraction of its CPU limit."""
    start = time.monotonic()
    limits = Limits(timeout_s=scaled(0.1), memory_mb=256, load_s=scaled(1.0))  # scaled: slower under emulation
    err = refusal(method_box(tmp_path, "arena_sleep_under_limit", limits, seconds=scaled(1.0)), calls=12)
    assert err.kind == "timeout" and "wall-clock budget" in str(err) and "earned" in str(err), str(err)
    assert time.monotonic() - start < scaled(10)


# --------------------------------------------------------- memory, exits and threads without a cgroup (class 5)
def test_memory_held_in_page_tables_is_refused(tmp_path, mode):
    """One-page mappings 1 GB apart: under RLIMIT_AS, but their page tables hold more than the cap; a cgroup counts
    them, and without one the watcher reads the sandbox's resident memory with its page tables (VmRSS + VmPTE)."""
    start = time.monotonic()
    err = refusal(method_box(tmp_path, "arena_page_tables", Limits(timeout_s=10.0, memory_mb=64), maps=20000,
                             seconds=20))
    assert err.kind == "memory", str(err)
    assert time.monotonic() - start < 15  # killed while it holds it, not after


def test_a_method_that_kills_itself_is_a_crash_not_memory(tmp_path, mode):
    err = refusal(method_box(tmp_path, "arena_self_kill"))
    assert err.kind == "crash" and "memory" not in str(err), str(err)


def test_threads_held_at_the_task_cap_inside_one_call_are_refused(tmp_path, mode):
    # 1 GB: the address space leaves room for the threads' stacks and arenas (256 MB stops them at 7)
    err = refusal(method_box(tmp_path, "arena_threads_held", Limits(timeout_s=5.0, memory_mb=1024), threads=20,
                             seconds=8))
    assert err.kind == "file_access" and "threads" in str(err), str(err)


# ------------------------------------------------------------------------ one uid per sandbox (class 3)
def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(f.read().split("Uid:")[1].split()[1])
    except OSError:  # it has ended
        return None


def test_each_sandbox_runs_as_its_own_uid_shared_with_nothing(tmp_path):
    """Run by root, each sandbox gets a uid of its own from a reserved range (as systemd's DynamicUser and nsjail
    do), used by no other process; run by another user it is that user's (the only one it may use)."""
    with method_box(tmp_path / "a", "arena_escape_guard", target="/x") as a, \
            method_box(tmp_path / "b", "arena_escape_guard", target="/x") as b:
        pids = {name: s._box.pids() for name, s in (("a", a), ("b", b))}
        owners = {name: {_uid(p) for p in found} for name, found in pids.items()}
        mine = set(pids["a"]) | set(pids["b"])
        others = {_uid(int(p)) for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine}
    assert all(len(found) == 1 for found in owners.values()), owners
    if os.geteuid() != 0:
        assert owners["a"] == owners["b"] == {os.geteuid()}
        return
    assert owners["a"] != owners["b"] and not (owners["a"] | owners["b"]) & others
    first, last = uids.uid_range()
    assert all(first <= uid <= last for uid in owners["a"] | owners["b"]) and 65534 not in owners["a"]


def _queued_signals(pids: list[int]) -> int:
    """The signals queued for the sandbox's interpreter's uid as the kernel counts them (``SigQ: queued/limit``) in
    its user namespace (bubblewrap's own processes sit higher up, where the harness's uid counts too when the
    harness is not root)."""
    for pid in pids:
        try:
            if b"serve.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(Path(f"/proc/{pid}/status").read_text().split("SigQ:")[1].split("/")[0])
        except (OSError, IndexError, ValueError):
            pass
    raise AssertionError(f"no interpreter among {pids}")


def test_the_per_user_limits_are_the_sandboxs_own_and_small(tmp_path):
    """RLIMIT_SIGPENDING, RLIMIT_NPROC, RLIMIT_MSGQUEUE and RLIMIT_MEMLOCK count per user: set low in the sandbox,
    a method cannot queue its uid's pending signals up to the host's limit (96,367 before)."""
    with method_box(tmp_path, "arena_user_limits", signals=5000) as sandbox:
        sandbox.call(layer_arrays(), **SCALARS)
        queued = _queued_signals(sandbox._box.pids())
        with pytest.raises(SubmissionError) as err:
            sandbox.call(layer_arrays(), **SCALARS)
    seen = reported(err.value, "LIMITS")
    # the count also holds the other signals pending for the uid there (the stop between calls, bubblewrap's init's
    # SIGCHLD; an unprivileged harness's uid is the sandbox's): tens at most, of the 5,000 sent (all queued before)
    assert seen["RLIMIT_SIGPENDING"] <= 64 and queued < 100, (queued, seen)
    assert seen["RLIMIT_MSGQUEUE"] == 0 and seen["RLIMIT_MEMLOCK"] == 0 and seen["RLIMIT_NPROC"] <= box.MAX_PIDS


# -------------------------------------------------------------------- a failed child restarts (class 9)
def _whole(sandbox, **scalars):
    """The whole-cache call on a cache of ``layer + 1`` layers (the method fails on a cache of one)."""
    from cachecraft_lib.arena.submissions.whole_cache import pack

    n = scalars["layer"] + 1
    return sandbox.call_whole(pack([layer_arrays()] * n), **{**scalars, "layer": 0, "n_layers": n})["out.0"]


RESTARTING = {"call": lambda sandbox, **scalars: sandbox.call(layer_arrays(), **scalars),
              "call_whole": _whole,
              "request": lambda sandbox, **scalars: sandbox.request("score", layer_arrays(), **scalars)["out"]}


@pytest.mark.parametrize("path", sorted(RESTARTING))
def test_a_failed_child_is_restarted_for_the_next_call(tmp_path, path):
    """Each of MethodSandbox's three ways in (a layer's call, the whole-cache call, another hook's request) closes
    a child whose method failed and starts a fresh one for the next call."""
    sandbox, run = method_box(tmp_path, "arena_fail_on_layer0"), RESTARTING[path]
    with sandbox:
        with pytest.raises(SubmissionError, match="fails on layer 0 only"):
            run(sandbox, **SCALARS)
        assert not sandbox.alive  # a failed method is not trusted with another call in the same process
        answer = run(sandbox, **{**SCALARS, "layer": 1})
        assert answer.shape == (2, 48) and sandbox.alive


# --------------------------------------------------------------------- a missing boundary (class 8)
@pytest.mark.parametrize("missing", ["bwrap", "userns"])
def test_a_missing_boundary_is_one_error_line_exit_2_and_nothing_recorded(tmp_path, monkeypatch, capsys, missing):
    from cachecraft_lib.arena.boards import splits
    from cachecraft_lib.cli import main

    why = {"bwrap": "no bubblewrap (`bwrap` is not on PATH); install it with `apt-get install -y bubblewrap`",
           "userns": "bubblewrap cannot create the sandbox's namespaces here (setting up uid map: Permission "
                     "denied); unprivileged user namespaces must be allowed"}[missing]
    monkeypatch.setattr(boundary, "missing_parts", lambda: {"bwrap": why})
    monkeypatch.delenv(boundary.WEAK_ENV, raising=False)
    monkeypatch.setenv(splits.SECRET_ENV, hashlib.sha256(b"cachecraft tests: a missing boundary").hexdigest())
    folder = os.path.join(os.path.dirname(__file__), "assets", "arena", "good_scores")
    status = main(["arena", "submit", folder, "--board", "A", "--profile", "smoke", "--root", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and "Traceback" not in err
    assert why in err and "cachecraft doctor" in err
    assert not (tmp_path / "a" / "ledger.jsonl").exists() or not (tmp_path / "a" / "ledger.jsonl").read_text()


def test_a_sandbox_that_cannot_start_says_what_is_missing_and_names_the_doctor(tmp_path, monkeypatch):
    """The probe passed but this start failed (namespaces refused since, a cgroup gone): the same fail-closed error."""
    def refused(*args, **kwargs):
        raise OSError(1, "setting up uid map: Operation not permitted")

    monkeypatch.setattr(box, "Process", refused)
    with pytest.raises(boundary.BoundaryUnavailable) as err:
        method_box(tmp_path, "arena_escape_guard", target="/x").start()
    assert "uid map" in str(err.value) and "cachecraft doctor" in str(err.value)


# ------------------------------------------------------------------ not dumpable (red team, 2026-12-07)
def test_the_child_is_not_dumpable_after_its_limits():
    """RLIMIT_CORE 0 does not stop a piped ``core_pattern`` helper from receiving the process's memory (the test
    inputs), and a dumpable process's memory is readable through /proc/<pid>/mem by other processes of its uid:
    the child's ``limit_process`` makes it non-dumpable (and the filter lets it only read that flag back)."""
    import subprocess
    import sys

    from cachecraft_lib.sandbox import allowlist
    from cachecraft_lib.sandbox import runtime as runtime_package

    runtime = Path(runtime_package.__file__).parent
    code = ("import ctypes, sys; sys.path[:0] = [sys.argv[1]]; import serve; libc = ctypes.CDLL(None); "
            "before = libc.prctl(3, 0, 0, 0, 0); serve.limit_process({}); print(before, libc.prctl(3, 0, 0, 0, 0))")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(runtime)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["1", "0"], out
    assert 4 not in allowlist.PRCTL_OPTIONS.values() and allowlist.PRCTL_START_ONLY == {"PR_SET_DUMPABLE": 4}


def test_the_covered_folders_are_dated_by_the_sandbox_not_by_the_harness(tmp_path):
    """The folders the boundary covers (the standard library's site-packages and test suite) are empty folders of
    the sandbox's own: one made once per harness dated the harness's start, and a method read from it how long the
    run had gone on (red team, 2026-12-07). Two sandboxes some seconds apart each see them made at their start."""
    ages = []
    for i in range(2):
        if i:
            time.sleep(scaled(3))
        with method_box(tmp_path / str(i), "arena_file_times") as sandbox:
            with pytest.raises(SubmissionError) as err:
                sandbox.call(layer_arrays(), **SCALARS)
            ages.append(reported(err.value, "AGES"))
    assert ages[1] and all(age < scaled(3) for age in ages[1].values()), ages
