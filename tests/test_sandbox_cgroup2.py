"""The cgroup v2 code (``sandbox/cgroup2.py``, ``cgroup_mode.py``) against a fake unified hierarchy in a temp dir:
the path parsing, the files written, ``cpu.stat``/``memory.events``/``pids.events`` read, the scope's command
and how its folder is found. The real v2 test runs only on a machine whose ``/sys/fs/cgroup`` is the unified
hierarchy and gives this user a cgroup (delegated or a systemd user scope); this project's development
machine is cgroup v1 (root, hybrid without the unified tree at ``/sys/fs/cgroup``), so it skips here."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import SCALARS, layer_arrays, method_box

from cachecraft_lib.sandbox import boundary, cgroup2, cgroup_mode


def fake_tree(tmp_path: Path, own: str = "/user.slice/user-1000.slice/session-1.scope") -> tuple[Path, Path, Path]:
    """(root, the caller's folder, a /proc/self/cgroup file naming it), like a v2 machine's."""
    root = tmp_path / "cgroup"
    folder = root / own.lstrip("/")
    folder.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (folder / "cgroup.controllers").write_text("cpu memory pids\n")
    (folder / "cgroup.subtree_control").write_text("")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(f"0::{own}\n")
    return root, folder, proc


def test_the_callers_folder_is_read_from_the_unified_line(tmp_path):
    root, folder, proc = fake_tree(tmp_path)
    assert cgroup2.own_path(root, str(proc)) == folder
    (root / "x").mkdir()
    proc.write_text("12:pids:/x\n4:memory:/x\n0::/elsewhere\n")  # a hybrid machine: the v1 lines are skipped
    assert cgroup2.own_path(root, str(proc)) is None  # ... and a folder that does not exist is no cgroup
    (root / "cgroup.controllers").unlink()  # no unified hierarchy at the root: a v1 machine
    proc.write_text("0::/user.slice/user-1000.slice/session-1.scope\n")
    assert cgroup2.own_path(root, str(proc)) is None


def test_a_delegated_folder_gets_the_controllers_its_children_need(tmp_path):
    _, folder, _ = fake_tree(tmp_path)
    assert cgroup2.delegated_missing(folder) is None
    assert (folder / "cgroup.subtree_control").read_text() == "+memory +pids"
    (folder / "cgroup.controllers").write_text("cpu\n")
    (folder / "cgroup.subtree_control").write_text("")
    assert "memory, pids controller" in cgroup2.delegated_missing(folder)
    assert "no cgroup v2" in cgroup2.delegated_missing(None)


def test_a_sandbox_cgroup_writes_its_caps_and_reads_the_kernels_counters(tmp_path):
    _, folder, _ = fake_tree(tmp_path)
    cg = cgroup2.CGroup2(folder, 300 << 20, 16)
    made = cg.folder
    assert made.parent == folder and made.name.startswith("cachecraft-sandbox-")
    assert (made / "memory.max").read_text() == str(300 << 20) and (made / "pids.max").read_text() == "16"
    (made / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (made / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (made / "pids.events").write_text("max 4\n")
    (made / "pids.current").write_text("3\n")
    (made / "cgroup.procs").write_text("")
    assert (cg.cpu_seconds(), cg.oom_kills(), cg.pid_limit_hits(), cg.n_processes()) == (2.5, 1, 4, 3)
    cg.kill(patience_s=0.1)
    assert (made / "cgroup.kill").read_text() == "1" and cg.folders == {}  # a real folder is then removed


def test_a_systemd_scope_is_asked_for_the_caps_and_found_from_the_childs_cgroup(tmp_path):
    unit, argv = cgroup2.scope_command(["bwrap", "--", "python"], 300 << 20, 16)
    at = next(i for i, a in enumerate(argv) if a.endswith("systemd-run"))  # after `env` and the manager's address
    assert argv[at + 1:at + 4] == ["--user", "--scope", "--quiet"] and argv[-3:] == ["bwrap", "--", "python"]
    assert f"--property=MemoryMax={300 << 20}" in argv and "--property=TasksMax=16" in argv
    assert "--property=MemorySwapMax=0" in argv and f"--unit={unit[:-len('.scope')]}" in argv
    root, _, _ = fake_tree(tmp_path)
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    path = f"/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}"
    (proc / "4242" / "cgroup").write_text(f"0::{path}\n")
    cg = cgroup2.CGroup2(None, 300 << 20, 16, root=root)
    cg.attach(4242, unit, patience_s=1.0, proc=str(proc))
    assert cg.folder == root / path.lstrip("/")
    (proc / "4242" / "cgroup").write_text("0::/user.slice/elsewhere.scope\n")
    with pytest.raises(OSError, match="did not reach its scope"):
        cgroup2.CGroup2(None, 1, 1, root=root).attach(4242, unit, patience_s=0.05, proc=str(proc))


def test_the_no_cgroup_mode_is_forced_by_its_variable(monkeypatch):
    monkeypatch.setenv(cgroup_mode.NO_CGROUP_ENV, "1")
    cgroup_mode.detect.cache_clear()
    try:
        mode = cgroup_mode.detect()
        assert mode.kind is None and cgroup_mode.NO_CGROUP_ENV in mode.why and mode.make(1, 1) is None
        assert boundary.Boundary(bwrap=True, seccomp=True, cgroup=mode).name == boundary.NO_CGROUP
    finally:
        cgroup_mode.detect.cache_clear()


@pytest.mark.skipif(cgroup_mode.detect().kind not in ("v2", "scope"),  # detect(): cached per process
                    reason="no cgroup v2 for this user here: /sys/fs/cgroup is cgroup v1 on this machine (see doc)")
def test_on_a_real_cgroup_v2_the_sandbox_runs_in_its_own_capped_cgroup(tmp_path):
    with method_box(tmp_path, "arena_fork_bomb") as box:
        assert box.boundary == boundary.FULL_V2
        cg = box._box.process.cgroup
        assert (cg.folder / "memory.max").read_text().strip() == str((256 + 96) << 20)
        assert box.call(layer_arrays(), **SCALARS).shape == (2, 48) and cg.cpu_seconds() > 0
        folder = cg.folder
    try:  # closed: nothing left in it, or the folder gone (removed by kill, or a scope collected by systemd)
        left = (folder / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        left = []
    assert not left
