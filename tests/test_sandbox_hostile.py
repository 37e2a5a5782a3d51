"""The arena's way out, one hostile method per way (tests/assets/hostile): each is refused with a kind and
leaves no trace outside the sandbox. Most first switch off the audit hook through a module already loaded
(``sys.modules['guard']``), so what stops them is the operating system's boundary, not the hook."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from sandbox_helpers import (
    SCALARS,
    alarm_runtime,
    cgroup_names,
    expected_boundary,
    layer_arrays,
    listener,
    method_box,
    scaled,
)
from sandbox_helpers import processes_in as left_of

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.sandbox import Limits, boundary, cgroup_mode

SECRET = "s3cr3t-" + "0123456789abcdef"


def refused(box, calls: int = 1) -> SubmissionError:
    """Start ``box``, call it until it is refused; the refusal (and the box is closed, nothing left)."""
    with pytest.raises(SubmissionError) as err:
        with box:
            names = cgroup_names(box)
            for _ in range(calls):
                box.call(layer_arrays(), **SCALARS)
    assert not left_of(names), "a process of the sandbox survived its evaluation"
    assert "LEAKED" not in str(err.value) and SECRET not in str(err.value)
    return err.value


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


def test_a_whole_boundary_is_in_force_here(tmp_path):
    """Whole: bwrap + the filter + a cgroup, or (none to be had, or CI's forced mode) one process under rlimits."""
    name = method_box(tmp_path, "arena_escape_guard", target="/x").boundary
    assert boundary.is_whole(name) and name == expected_boundary()
    if cgroup_mode.forced_off():
        assert name == boundary.NO_CGROUP


def test_escaping_the_audit_hook_reads_nothing(tmp_path, secret_file):
    err = refused(method_box(tmp_path, "arena_escape_guard", target=secret_file))
    assert err.kind == "crash" and "No such file" in str(err)


def test_the_same_escape_reads_the_file_without_the_os_boundary(tmp_path, secret_file, monkeypatch):
    """The control: with only the audit hook (the old design) the escape works; the test above can fail."""
    monkeypatch.setattr(boundary, "missing_parts", lambda: {"bwrap": "off", "seccomp": "off"})
    box = method_box(tmp_path, "arena_escape_guard", Limits(allow_weak=True), target=secret_file)
    assert box.boundary.startswith("weak:")
    with pytest.raises(SubmissionError) as err, box:
        box.call(layer_arrays(), **SCALARS)
    assert SECRET in str(err.value)


@pytest.mark.parametrize("target", ["README.md", "/etc/passwd", "/etc/hostname", os.path.expanduser("~/.bashrc")])
def test_repository_and_system_files_are_not_there(tmp_path, target):
    path = target if target.startswith("/") else str(boundary.RUNTIME.parents[2] / target)
    assert refused(method_box(tmp_path, "arena_escape_guard", target=path)).kind == "crash"


def test_the_parents_environment_and_memory_are_out_of_sight(tmp_path, monkeypatch):
    monkeypatch.setenv("CACHECRAFT_TEST_SECRET", SECRET)
    err = refused(method_box(tmp_path, "arena_proc_environ"))
    assert err.kind == "crash" and "CACHECRAFT" not in str(err) and "pytest" not in str(err)
    assert refused(method_box(tmp_path, "arena_proc_mem", pid=os.getpid())).kind == "crash"


@pytest.mark.parametrize("name", ["arena_socket", "arena_setns"])
def test_no_socket_reaches_a_listener_of_the_harness(tmp_path, name):
    with listener() as (port, received):
        err = refused(method_box(tmp_path, name, port=port, pid=os.getpid()))
        assert received() == b""
    assert err.kind in ("crash", "network") and ("not permitted" in str(err) or "No such file" in str(err))


def test_no_new_namespaces(tmp_path):
    err = refused(method_box(tmp_path, "arena_unshare"))
    assert err.kind == "crash" and "unshare refused" in str(err)


@pytest.mark.parametrize("name", ["arena_exec", "arena_subprocess"])
def test_no_program_can_be_started(tmp_path, name):
    marker = tmp_path / "exec-marker"
    err = refused(method_box(tmp_path, name, target=marker))
    assert err.kind == "crash" and not marker.exists()
    assert "Permission denied" in str(err) or "not permitted" in str(err) or "No such file" in str(err)


def test_no_ptrace_of_the_harness(tmp_path):
    err = refused(method_box(tmp_path, "arena_ptrace", pid=os.getpid()))
    assert err.kind == "crash" and "ptrace refused" in str(err)


def test_the_harness_cannot_be_signalled(tmp_path):
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    try:
        err = refused(method_box(tmp_path, "arena_kill_parent", pid=os.getpid()))
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert err.kind == "crash" and not got and "No such process" in str(err)


def test_host_global_kernel_settings_and_root_files_cannot_be_opened_for_writing(tmp_path):
    """Run as root the sandbox's uid is root outside: the read-only mounts and the seccomp filter stop these."""
    settings = ["/proc/sys/kernel/printk_ratelimit", "/proc/sys/kernel/core_pattern"]
    nodes = ["/dev/null", "/dev/zero", "/dev/full"]
    before = [open(p).read() for p in settings] + [os.stat(p)[:1] + os.stat(p)[4:6] for p in nodes]
    python = os.path.relpath(os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix))
    err = refused(method_box(tmp_path, "arena_host_sysctl", python=python))
    assert err.kind == "crash" and "every host-global target refused writing" in str(err), str(err)
    assert [open(p).read() for p in settings] + [os.stat(p)[:1] + os.stat(p)[4:6] for p in nodes] == before
    assert os.stat("/dev/zero").st_mtime > 0  # the method would set it to 1970


def test_no_file_is_written_outside(tmp_path):
    marker = tmp_path / "marker"
    err = refused(method_box(tmp_path, "arena_write_marker", target=marker))
    assert err.kind == "crash" and not marker.exists()


@pytest.mark.parametrize("name", ["arena_daemon", "arena_fork_memory"])
def test_no_process_can_be_created(tmp_path, name):
    """The filter refuses fork, vfork and clone without CLONE_THREAD in every mode (without a cgroup this is what
    makes the per-process limits bound the whole sandbox): a daemon or a second process holding memory is refused."""
    err = refused(method_box(tmp_path, name, Limits(timeout_s=10.0, memory_mb=200), mb=180))
    assert err.kind == "crash" and "not permitted" in str(err), str(err)


@pytest.mark.parametrize("how", ["fork", "thread"])
def test_a_process_or_thread_started_while_loading_is_refused(tmp_path, how):
    box = method_box(tmp_path, "arena_task_at_load", how=how)
    with pytest.raises(SubmissionError) as err:
        box.start()
    if how == "fork":  # refused by the filter
        assert err.value.kind == "crash" and "not permitted" in str(err.value)
    else:  # a thread is allowed by the filter and counted: it would run between calls
        assert err.value.kind == "file_access" and "1 process(es) or thread(s)" in str(err.value)
    assert "loading" in str(err.value) and not box.alive


def test_cpu_used_between_calls_is_charged_to_the_next(tmp_path, monkeypatch):
    """A timer's handler runs after the reply (no thread, no process): its CPU counts against the next call. (The
    sandbox is stopped between calls, so here the stop is switched off: this is the accounting behind it.)"""
    from cachecraft_lib.sandbox import box as box_module

    monkeypatch.setattr(box_module.Box, "_pause", lambda self: None)
    box = method_box(tmp_path, "arena_cpu_between_calls", Limits(timeout_s=1.0, memory_mb=256), seconds=3.0)
    with pytest.raises(SubmissionError) as err:
        with box:
            names = cgroup_names(box)
            box.call(layer_arrays(), **SCALARS)
            alarm_runtime(box)
            end = time.monotonic() + 120  # the harness's own work between two layers, until the handler has
            while box._box._gap() < 1.0 and time.monotonic() < end:  # burned a call's CPU (waits on state)
                time.sleep(0.05)
            box.call(layer_arrays(), **SCALARS)
    assert err.value.kind == "timeout" and "between calls" in str(err.value) and box.calls == 1
    assert not left_of(names)


def test_a_fork_bomb_starts_nothing(tmp_path):
    """Every fork fails (the method catches it and answers): the sandbox still holds only its own tasks."""
    with method_box(tmp_path, "arena_fork_bomb") as box:
        trace = cgroup_names(box)
        assert box.call(layer_arrays(), **SCALARS).shape == (2, 48)
        assert box._box.process.tasks() == box._box.baseline_pids == 3
    assert not left_of(trace)


def test_just_under_the_cpu_limit_on_every_call_meets_the_evaluation_limit(tmp_path):
    start = time.monotonic()
    box = method_box(tmp_path, "arena_busy_under_limit", Limits(timeout_s=scaled(1.0), wall_s=scaled(8.0)),
                     seconds=scaled(0.5))
    err = refused(box, calls=100)
    assert err.kind == "timeout" and "wall-clock budget" in str(err) and time.monotonic() - start < scaled(60)
    assert 1 <= box.calls < 20  # each call alone is within its limit


def test_sleeping_just_under_the_call_backstop_meets_the_evaluation_limit(tmp_path, monkeypatch):
    from cachecraft_lib.sandbox import box as box_module

    monkeypatch.setattr(box_module, "WALL_MIN_S", scaled(1.0))
    monkeypatch.setattr(box_module, "WALL_FACTOR", 1)
    box = method_box(tmp_path, "arena_sleep_under_limit", Limits(timeout_s=scaled(1.0), wall_s=scaled(3.0)),
                     seconds=scaled(0.8))
    err = refused(box, calls=50)
    assert err.kind == "timeout" and "wall-clock budget" in str(err) and 2 <= box.calls < 5


def test_the_wall_budget_is_per_evaluation_not_per_context(tmp_path):
    """The arena opens a sandbox per context; the evaluation's ``wall_s`` is shared by all of them."""
    import pandas as pd

    from cachecraft_lib.arena.board_runner import over_contexts
    from cachecraft_lib.arena.submissions.press import sandbox_for

    box = method_box(tmp_path, "arena_sleep_under_limit", seconds=scaled(0.4))
    limits, done = Limits(timeout_s=scaled(2.0), memory_mb=256, wall_s=scaled(2.5)), []

    def one(group: pd.DataFrame) -> list[dict]:
        for layer in range(2):  # 0.8 s of sleep per context, well under wall_s alone
            sandbox_for(box.submission, limits).call(layer_arrays(), **{**SCALARS, "layer": layer})
        done.append(group.context_id.iloc[0])
        return []

    items = pd.DataFrame({"context_id": [f"c{i}" for i in range(8)]})
    with pytest.raises(SubmissionError) as err:
        over_contexts(items, one, "A", progress=False)
    assert err.value.kind == "timeout" and f"wall-clock budget of {scaled(2.5):g} s" in str(err.value)
    assert 1 <= len(done) <= 3
    over_contexts(items.iloc[:1], one, "A", progress=False)  # a new evaluation starts a fresh budget


def test_garbage_on_the_reply_pipe_is_a_protocol_refusal(tmp_path):
    err = refused(method_box(tmp_path, "arena_protocol_garbage"))
    assert err.kind == "protocol", str(err)


def test_without_the_boundary_nothing_runs_and_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(boundary, "missing_parts", lambda: {"bwrap": "no bubblewrap; apt-get install -y bubblewrap"})
    monkeypatch.delenv(boundary.WEAK_ENV, raising=False)
    with pytest.raises(boundary.BoundaryUnavailable, match="apt-get install -y bubblewrap") as err:
        method_box(tmp_path, "arena_escape_guard", target="/x")
    assert "cachecraft doctor" in str(err.value) and f"{boundary.WEAK_ENV}=1" in str(err.value)
    assert "Limits(" not in str(err.value)  # what to do, not an API to call
    weak = method_box(tmp_path, "arena_escape_guard", Limits(allow_weak=True), target="/x")
    cgroup = "+cgroup" if cgroup_mode.detect().kind else ""
    assert weak.boundary == f"weak: seccomp{cgroup}; missing bwrap"
