"""bubblewrap's command (``sandbox/bwrap.py``): the binary found (on PATH, named by CACHECRAFT_BWRAP, or carried to a
GPU machine by scripts/gpu_wheels.sh), neutral paths only, no /proc, a read-only root, and a root harness's drop
to an unprivileged uid through the mount stage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sandbox_helpers import SCALARS, layer_arrays, method_box

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.sandbox import boundary, bwrap

MOUNTS = [(Path("/opt/py"), "python"), (Path("/home/someone/checkout/runtime"), "runtime")]


def carried(tmp_path: Path) -> Path:
    """A copy of this machine's bwrap laid out as gpu_wheels.sh unpacks it (usr/bin/bwrap and libs/)."""
    exe = tmp_path / "bubblewrap" / "usr" / "bin" / "bwrap"
    exe.parent.mkdir(parents=True)
    shutil.copy2(shutil.which("bwrap"), exe)
    (tmp_path / "bubblewrap" / "libs").mkdir()
    return exe


def test_the_binary_named_by_the_variable_is_used_and_its_libraries_found(tmp_path, monkeypatch):
    exe = carried(tmp_path)
    monkeypatch.setenv(bwrap.BWRAP_ENV, str(exe))
    assert bwrap.find() == exe and bwrap.library_dir(exe) == exe.parents[2] / "libs"
    spec = bwrap.launch(exe, MOUNTS, ["python"], None, None, None)
    assert spec.argv[0] == str(exe) and spec.env["LD_LIBRARY_PATH"] == str(exe.parents[2] / "libs")
    monkeypatch.setenv(bwrap.BWRAP_ENV, str(tmp_path / "nothing"))
    assert bwrap.find() is None


def test_the_sandbox_sees_neutral_paths_no_proc_and_a_read_only_root():
    argv = bwrap.launch(Path("/usr/bin/bwrap"), MOUNTS, ["python", "-I"], None, 5, None).argv
    assert "--proc" not in argv and "--dev" not in argv and argv[argv.index("--") - 4:argv.index("--") - 2] == [
        "--remount-ro", "/"]
    targets = [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] in map(str, dict(MOUNTS))]
    assert targets == ["/sandbox/python", "/sandbox/runtime"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"] == [f"/dev/{d}" for d in bwrap.DEVICES]
    assert argv[argv.index("--seccomp") + 1] == "5" and argv[-2:] == ["python", "-I"]


def test_a_root_harness_stages_the_mounts_and_drops_to_the_uid():
    spec = bwrap.launch(Path("/usr/bin/bwrap"), MOUNTS, ["python"], None, None, 65534)
    assert spec.argv[0] == str(bwrap.STAGE / "bin" / "bwrap") and spec.preexec is not None
    sources = [spec.argv[i + 1] for i, a in enumerate(spec.argv) if a == "--ro-bind" and "/sandbox/" in spec.argv[i + 2]]
    assert sources == [str(bwrap.STAGE / "python"), str(bwrap.STAGE / "runtime")]
    assert spec.preexec.args[1] == [("/usr/bin/bwrap", str(bwrap.STAGE / "bin/bwrap")),
                                    ("/opt/py", str(bwrap.STAGE / "python")),
                                    ("/home/someone/checkout/runtime", str(bwrap.STAGE / "runtime"))]
    assert spec.preexec.args[2] == 65534


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap here to carry")
def test_a_carried_bubblewrap_runs_the_sandbox(tmp_path, monkeypatch):
    exe = carried(tmp_path)  # under pytest's tmp folder (0700 as root): the stage makes it reachable after the drop
    monkeypatch.setenv(bwrap.BWRAP_ENV, str(exe))
    boundary._probe.cache_clear()
    try:
        box = method_box(tmp_path / "sub", "arena_escape_guard", target="/x")
        assert boundary.is_whole(box.boundary)
        with pytest.raises(SubmissionError) as err, box:
            # the command may start with a launcher (a systemd user scope: env ... systemd-run --scope ... bwrap)
            launched = [str(a) for a in box._box.process.proc.args if Path(str(a)).name == "bwrap"]
            assert launched and launched[0] in (str(exe), str(bwrap.STAGE / "bin" / "bwrap"))
            box.call(layer_arrays(), **SCALARS)
        assert err.value.kind == "crash" and "No such file" in str(err.value)
    finally:
        boundary._probe.cache_clear()
