"""Classes a red-team pass found through the OS boundary, each closed: a process name of any bytes (the harness
reads every host process's /proc stat), calls that set timers (CPU burned between calls by a handler), name the
process, read host-wide counters (sysinfo) or stack a further filter, and the interpreter's prefix showing the
host's installed packages and build paths."""

from __future__ import annotations

import ast
import errno
import os
import platform
import subprocess
import sys
import time

import pytest
from sandbox_helpers import HOSTILE, SCALARS, filled, layer_arrays, submission

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.arena.submissions.sandbox import MethodSandbox
from cachecraft_lib.sandbox import Limits, boundary, watch

X86_64 = platform.machine() == "x86_64"
NAME = b"\xff\xfe) 9 9 ("  # not UTF-8, and a ')' that splits a text parse at the wrong place
NAMED = f"import ctypes, sys; ctypes.CDLL(None).prctl(15, {NAME!r}, 0, 0, 0); sys.stdin.read()"
# (x86-64 number, arguments): each answers something other than EPERM without the filter (0, EFAULT, EINVAL)
CALLS = {"setitimer": (38, 0, 0, 0), "getitimer": (36, 0, 0), "alarm": (37, 0), "timer_create": (222, 0, 0, 0),
         "sysinfo": (99, 0), "prctl_set_name": (157, 15, 0), "seccomp_action_avail": (317, 2, 0, 0),
         "prctl_set_seccomp": (157, 22, 0), "prctl_set_dumpable": (157, 4, 1), "fcntl_setpipe_sz": (72, 1, 1031, 1 << 20), "fcntl_setown": (72, 1, 8, 1)}
PREFIX = '''import sys
import numpy as np
class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None  # the OS boundary alone is tried
        os = __import__("os")
        lib = os.path.dirname(os.__file__)
        seen = {"bin": sorted(os.listdir("/sandbox/python/bin")), "site": os.listdir(lib + "/site-packages"),
                "config": [os.listdir(lib + "/" + n) for n in os.listdir(lib) if n.startswith("config-")],
                "data": []}
        for name in os.listdir(lib):
            if name.startswith("_sysconfigdata"):
                try:
                    seen["data"].append(len(open(lib + "/" + name, "rb").read()))
                except OSError:
                    pass
        raise RuntimeError("SEEN " + repr(seen))
'''


def _comm(pid: int) -> bytes:
    with open(f"/proc/{pid}/comm", "rb") as f:
        return f.read().rstrip(b"\n")


def _whole_boundary() -> bool:
    return not boundary.missing_parts()


def _reported(tmp_path, source: str, marker: str) -> dict:
    box = MethodSandbox(submission(tmp_path, source), Limits(timeout_s=5.0, memory_mb=256))
    with pytest.raises(SubmissionError) as err:
        with box:
            box.call(layer_arrays(), **SCALARS)
    assert marker in str(err.value), str(err.value)
    return ast.literal_eval(str(err.value).split(marker + " ", 1)[1].split(" (")[0].rstrip())


def test_a_host_process_named_with_bytes_that_are_not_utf8_breaks_no_scan():
    """Any process on the host may name itself so: the process-tree scan behind every sandbox start reads it."""
    child = subprocess.Popen([sys.executable, "-c", NAMED], stdin=subprocess.PIPE)
    try:
        while child.poll() is None and _comm(child.pid) != NAME:  # waits on state: the child has named itself
            time.sleep(0.01)
        assert _comm(child.pid) == NAME
        assert child.pid in watch.descendants(os.getpid())
        assert watch.proc_threads(child.pid) == 1 and watch.proc_cpu_seconds(child.pid) is not None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not X86_64 or not _whole_boundary(), reason="x86-64 numbers, behind the whole boundary")
def test_timers_naming_host_counters_and_further_filters_are_refused(tmp_path):
    source = filled((HOSTILE / "arena_syscalls.py").read_text(), calls=CALLS)  # the boundary tests' method
    seen = _reported(tmp_path, source, "ERRNOS")
    assert seen == dict.fromkeys(CALLS, errno.EPERM)


@pytest.mark.skipif(not _whole_boundary(), reason="the neutral paths are bubblewrap's")
def test_the_interpreter_prefix_shows_no_host_packages_or_build_paths(tmp_path):
    seen = _reported(tmp_path, PREFIX, "SEEN")
    assert seen["bin"] == [os.path.basename(os.path.realpath(sys.executable))]
    assert seen["site"] == [] and all(size == 0 for size in seen["data"])
    assert all(files == [] for files in seen["config"])  # an empty folder covers the build's files
