"""How the sandbox gets a cgroup v2 where an organiser runs it (``sandbox/cgroup2.py``, ``cgroup_mode.py``):

- an unprivileged harness asks its own systemd user manager for a scope: the launch must carry the manager's
  address (``XDG_RUNTIME_DIR``, ``DBUS_SESSION_BUS_ADDRESS``) although the sandbox starts with a cleared
  environment; a fake ``systemd-run`` that refuses without them runs the very command a sandbox starts with;
- a root harness never gets that scope (its sandboxes drop to an unprivileged uid before ``systemd-run`` would
  run): it uses a delegated cgroup, whose own processes first move into a leaf (cgroup v2's no-internal-process
  rule), and only a cgroup systemd marked delegated is reorganised so.

The real machine for these is the cgroup v2 test machine (``scripts/vm/run.sh``); the last test runs only there.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from cachecraft_lib.sandbox import cgroup, cgroup2, cgroup_mode

# A stand-in for systemd-run: like `systemd-run --user --scope`, it fails without the user manager's address
# and otherwise runs the command after `--` in its own process (a scope keeps the pid).
FAKE_SYSTEMD_RUN = """#!/bin/sh
echo "$XDG_RUNTIME_DIR|$DBUS_SESSION_BUS_ADDRESS|$*" >> "{log}"
if [ -z "$DBUS_SESSION_BUS_ADDRESS" ] && [ -z "$XDG_RUNTIME_DIR" ]; then
  echo "Failed to connect to bus: \\$DBUS_SESSION_BUS_ADDRESS and \\$XDG_RUNTIME_DIR not defined" >&2; exit 1
fi
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


@pytest.fixture
def user_manager(tmp_path, monkeypatch):
    """A fake systemd-run first on PATH and a user runtime folder with a bus; yields the fake's log file."""
    bin_dir, runtime, log = tmp_path / "bin", tmp_path / "run-user-1000", tmp_path / "systemd-run.log"
    bin_dir.mkdir()
    runtime.mkdir()
    (runtime / "bus").touch()
    fake = bin_dir / "systemd-run"
    fake.write_text(FAKE_SYSTEMD_RUN.format(log=log))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    return log


def test_the_scope_launch_reaches_the_user_manager_from_a_cleared_environment(user_manager, tmp_path):
    unit, argv = cgroup2.scope_command(["/bin/sh", "-c", "echo started"], 300 << 20, 16)
    assert unit.endswith(".scope") and argv[-3:] == ["/bin/sh", "-c", "echo started"]
    # the sandbox's process starts with only its own variables (watch.Process: env=the launch's)
    done = subprocess.run(argv, capture_output=True, env={"OMP_NUM_THREADS": "1"}, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"started\n"
    runtime, bus, args = user_manager.read_text().strip().split("|")
    assert runtime == str(tmp_path / "run-user-1000") and bus == f"unix:path={runtime}/bus"
    assert args.split()[:3] == ["--user", "--scope", "--quiet"]
    assert f"--property=MemoryMax={300 << 20}" in args and "--property=TasksMax=16" in args


def test_the_scope_probe_runs_the_launch_as_a_sandbox_would(user_manager, tmp_path, monkeypatch):
    assert cgroup2.scope_missing(euid=1000) is None  # what the probe saw is what a sandbox will get
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "nowhere"))
    assert "enable-linger" in cgroup2.scope_missing(euid=1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run-user-1000"))
    (tmp_path / "run-user-1000" / "bus").unlink()
    assert "dbus-user-session" in cgroup2.scope_missing(euid=1000)


def test_the_user_managers_address_defaults_to_the_users_runtime_folder(tmp_path):
    env = cgroup2.session_env({}, uid=1234, run_user=tmp_path)
    assert env == {"XDG_RUNTIME_DIR": str(tmp_path / "1234"),
                   "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / '1234'}/bus"}
    given = {"XDG_RUNTIME_DIR": "/run/user/7", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/elsewhere"}
    assert cgroup2.session_env(given, uid=1234) == given
    assert "enable-linger" in cgroup2.session_missing(env)


def test_a_root_harness_never_gets_the_user_scope(user_manager, monkeypatch):
    """As root, even where `systemd-run --user --scope` answers, sandboxes (which start as an unprivileged uid)
    could not reach it: the mode is none, and why names the delegated cgroup to use instead."""
    assert "Delegate=yes" in cgroup2.scope_missing(euid=0)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(cgroup, "missing", lambda: "no v1 here")
    monkeypatch.setattr(cgroup2, "own_path", lambda: Path("/sys/fs/cgroup/system.slice/x.service"))
    monkeypatch.setattr(cgroup2, "delegated_missing", lambda folder: "not delegated")
    monkeypatch.delenv(cgroup_mode.NO_CGROUP_ENV, raising=False)
    cgroup_mode.detect.cache_clear()
    try:
        mode = cgroup_mode.detect()
    finally:
        cgroup_mode.detect.cache_clear()
    assert mode.kind is None and "Delegate=yes" in mode.why
    assert not user_manager.exists()  # systemd-run was not even tried


def busy_then(folder: Path, monkeypatch) -> list[str]:
    """Make enabling controllers in ``folder`` fail with EBUSY until its cgroup.procs is empty (as the kernel
    does while processes live in it); returns the writes to the leaf's cgroup.procs."""
    real_write, moved = Path.write_text, []

    def write_text(self: Path, data: str, *args, **kwargs):
        if self == folder / "cgroup.subtree_control" and (folder / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, "Device or resource busy")
        if self == folder / cgroup2.HARNESS_LEAF / "cgroup.procs":
            moved.append(data)
            left = [p for p in (folder / "cgroup.procs").read_text().split() if p != data]
            real_write(folder / "cgroup.procs", " ".join(left))
        return real_write(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    return moved


def delegated_folder(tmp_path: Path, marked: bool) -> Path:
    folder = tmp_path / "cgroup" / "system.slice" / "cachecraft.scope"
    folder.mkdir(parents=True)
    (folder / "cgroup.controllers").write_text("cpu memory pids\n")
    (folder / "cgroup.subtree_control").write_text("")
    (folder / "cgroup.procs").write_text("101\n102\n")
    if marked:
        os.setxattr(folder, "user.delegate", b"1")
    return folder


def test_a_delegated_cgroup_moves_its_processes_into_a_leaf_then_enables_the_controllers(tmp_path, monkeypatch):
    folder = delegated_folder(tmp_path, marked=True)
    moved = busy_then(folder, monkeypatch)
    assert cgroup2.delegated_missing(folder) is None
    assert moved == ["101", "102"] and (folder / "cgroup.subtree_control").read_text() == "+memory +pids"
    proc = tmp_path / "proc_self_cgroup"  # the harness, now in the leaf, still names the delegated folder
    proc.write_text(f"0::/system.slice/cachecraft.scope/{cgroup2.HARNESS_LEAF}\n")
    (tmp_path / "cgroup" / "cgroup.controllers").write_text("memory pids\n")
    assert cgroup2.own_path(tmp_path / "cgroup", str(proc)) == folder


def test_a_cgroup_not_marked_delegated_is_not_reorganised(tmp_path, monkeypatch):
    folder = delegated_folder(tmp_path, marked=False)
    moved = busy_then(folder, monkeypatch)
    why = cgroup2.delegated_missing(folder)
    assert "Delegate=yes" in why and moved == [] and not (folder / cgroup2.HARNESS_LEAF).exists()


@pytest.mark.skipif(not cgroup_mode.hierarchy().startswith("cgroup v2"),
                    reason="needs a cgroup v2 machine (scripts/vm/run.sh boots one); this one is not")
def test_on_cgroup_v2_the_harness_gets_the_mode_its_setup_gives():
    """In the test machine: an unprivileged user with a user manager gets the scope, root in a delegated cgroup
    the delegated mode (its processes in the leaf), root elsewhere none, and the reason says what to enable."""
    mode = cgroup_mode.detect()
    own = cgroup2.own_path()
    if os.geteuid() != 0 and os.environ.get("XDG_RUNTIME_DIR"):
        assert mode.kind in ("scope", "v2"), mode.why
    elif os.geteuid() == 0 and own is not None and cgroup2.is_delegated(own):
        assert mode.kind == "v2" and mode.parent == own, mode.why
        assert Path("/proc/self/cgroup").read_text().strip().endswith("/" + cgroup2.HARNESS_LEAF)
    elif os.geteuid() == 0:
        assert mode.kind is None and "Delegate=yes" in mode.why


def test_doctor_on_cgroup_v2_says_what_it_found_and_what_to_enable_for_root_and_for_a_user(monkeypatch):
    from cachecraft_lib.sandbox import boundary, diagnose

    monkeypatch.setattr(cgroup_mode, "hierarchy", lambda: "cgroup v2 (unified) at /sys/fs/cgroup, controllers: x")
    monkeypatch.setattr(boundary, "detect", lambda: cgroup_mode.CgroupMode(None, why="systemd scope: test"))
    monkeypatch.setattr(cgroup2, "own_path", lambda: Path("/sys/fs/cgroup/user.slice/user-1000.slice/s.scope"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    found = diagnose.diagnose()
    assert found.found[0].startswith("cgroup v2 (unified)") and "s.scope (not writable" in found.found[1]
    assert "as root on cgroup v2" in found.advice[0] and "systemd-run --scope -p Delegate=yes" in found.advice[0]
    assert "found:\n  cgroup v2 (unified)" in diagnose.report(found)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(diagnose.pwd, "getpwuid", lambda uid: type("pw", (), {"pw_name": "alice"}))
    advice = diagnose.diagnose().advice[0]
    assert "loginctl enable-linger alice" in advice and "dbus-user-session" in advice
