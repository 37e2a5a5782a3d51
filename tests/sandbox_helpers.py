"""Shared helpers of the sandbox tests: hostile sources filled in, sandboxes started, traces looked for."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import signal
import socket
from pathlib import Path

from test_arena_core_submission import BUDGET, layer_arrays  # noqa: F401  (the arena tests' layer)

from cachecraft_lib.arena.submissions.folder import Submission
from cachecraft_lib.arena.submissions.sandbox import MethodSandbox
from cachecraft_lib.sandbox import Limits

HOSTILE = Path(__file__).parent / "assets" / "hostile"
SCALARS = {"budget": BUDGET, "layer": 0, "n_layers": 1, "compression_ratio": 0.75}
# Why: a few tests hold a method to wall-clock budgets of 1-3 s, sized for real hardware. Under emulation (the
# cgroup v2 test machine under TCG, about 6-10x slower: scripts/vm/guest_mode.sh sets it) every duration of such a
# test, budgets and the method's own sleeps alike, is multiplied by this, so the proportions they test are kept.
TIME_SCALE = float(os.environ.get("CACHECRAFT_TEST_TIME_SCALE", "1"))


def scaled(seconds: float) -> float:
    """A test's duration on this machine (``TIME_SCALE``)."""
    return seconds * TIME_SCALE


def filled(text: str, **fill: object) -> str:
    for key, value in fill.items():
        text = text.replace(f"__{key.upper()}__", str(value))
    return text


def submission(folder: Path, source: str, returns: str = "scores") -> Submission:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "method.py").write_text(source)
    code = source.encode()
    return Submission(folder=folder, name="hostile", author="tester", boards=("A",),
                      code_sha256=hashlib.sha256(code).hexdigest(), returns=returns, code=code)


def method_box(folder: Path, name: str, limits: Limits | None = None, **fill: object) -> MethodSandbox:
    source = filled((HOSTILE / f"{name}.py").read_text(), **fill)
    return MethodSandbox(submission(folder, source), limits or Limits(timeout_s=5.0, memory_mb=256))


@dataclasses.dataclass
class Trace:
    """What identifies a running sandbox's processes: its cgroups' names and its process tree's pids."""

    names: list[str]
    pids: list[int]


def cgroup_names(box: object) -> Trace:
    """A running sandbox's cgroups and processes (to look for what is left of it afterwards)."""
    inner = box._box if hasattr(box, "_box") else box
    cg = inner.process.cgroup if inner.process is not None else None
    names = sorted({f.name for f in cg.folders.values()}) if cg is not None else []
    return Trace(names, inner.pids())


def processes_in(trace: Trace) -> list[int]:
    """Live processes of a closed sandbox (in its cgroups, or of its tree): none may be left."""
    found = [pid for pid in trace.pids if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if trace.names and any(n in Path(f"/proc/{pid}/cgroup").read_text() for n in trace.names):
                found.append(int(pid))
    return found


def alarm_runtime(box: object) -> None:
    """Send SIGALRM to a running sandbox's interpreter from outside (the sandbox may not set a timer itself)."""
    inner = box._box if hasattr(box, "_box") else box
    for pid in inner.pids():
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"serve.py" in argv[3:4] or argv[1:3] == [b"-I", b"-S"]:  # the interpreter, not bubblewrap
                os.kill(pid, signal.SIGALRM)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (OSError, IndexError):
        return True


def expected_boundary() -> str:
    """The whole boundary this machine should give (CI forces the no-cgroup mode with its variable)."""
    from cachecraft_lib.sandbox import boundary, cgroup_mode

    kind = cgroup_mode.detect().kind
    return {"v1": boundary.FULL, "v2": boundary.FULL_V2, "scope": boundary.FULL_V2}.get(kind, boundary.NO_CGROUP)


@contextlib.contextmanager
def listener():
    """A TCP listener on 127.0.0.1 (this test's network); yields (port, received) with ``received()``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.3)

    def received() -> bytes:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return b""
        with conn:
            conn.settimeout(0.5)
            return conn.recv(100) or b"connected"

    try:
        yield server.getsockname()[1], received
    finally:
        server.close()
