"""What a headless notebook run shows while it runs: the cell being run (k of n) with the time spent, the kernel's
progress output (tqdm bars and log lines, which a kernel writes to stderr), and a line at least every minute.

``ProgressEngine`` is papermill's nbclient engine with ``Progress`` hooked onto each cell's start and end; the
kernel's stderr reaches ``Progress.write`` through papermill's ``stderr_file``. The kernel talks to us over IPC
sockets in a private temporary folder (mode 0700) instead of TCP on loopback: only this user can reach it, so
ipykernel's "running over TCP without encryption" warning is answered rather than silenced (loopback TCP is
open to every local user; the messages are signed, but readable). ``IdleShutdownKernelManager`` ends the kernel
without the interrupt that made ipykernel log "KeyboardInterrupt caught in kernel" at the end of some runs.

Inside the kernel ``CACHECRAFT_HEADLESS=1`` is set, so the library's progress bars (``cachecraft_lib.util.progress``)
are text, not notebook widgets, and refresh at most every ``HEADLESS_INTERVAL`` seconds.
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
import time
from typing import Any, TextIO

from jupyter_client.manager import AsyncKernelManager
from papermill.engines import NBClientEngine, papermill_engines
from traitlets.config import Config

ENGINE = "cachecraft"
HEARTBEAT = 60.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # nested tqdm bars move the cursor: meaningless in a log


def clock(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Lines about one notebook's run, written to ``stream``: ``[name] cell k/n ...``, the kernel's stderr, and
    ``still running`` when nothing was written for ``heartbeat`` seconds."""

    def __init__(self, name: str, stream: TextIO | None = None, heartbeat: float | None = None) -> None:
        self.name, self.stream, self.heartbeat = name, stream or sys.stdout, heartbeat or HEARTBEAT
        self.start = self.cell_started = self.last = time.monotonic()
        self.k, self.n, self.cell_line, self._previous = 0, 0, "", ""
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None

    def say(self, text: str) -> None:
        with self._lock:
            self.stream.write(f"    [{self.name}] {text}\n")
            self.stream.flush()
            self.last = time.monotonic()

    def begin(self, cells: list[Any]) -> None:
        self.n = sum(c.get("cell_type") == "code" for c in cells)
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"progress-{self.name}")
        self._thread.start()

    def end(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)

    def cell_start(self, cell: Any, index: int | None = None) -> None:
        if cell.get("cell_type") != "code":
            return
        self.k += 1
        self.cell_started = time.monotonic()
        lines = [line for line in cell.source.splitlines() if line.strip()]
        self.cell_line = (lines[0][:70] + ("..." if len(lines[0]) > 70 else "")) if lines else "(empty)"
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            self.cell_line = "(the injected parameters)"
        self.say(f"cell {self.k}/{self.n}: {self.cell_line}  (notebook at {clock(time.monotonic() - self.start)})")

    def cell_complete(self, cell: Any, index: int | None = None) -> None:
        took = time.monotonic() - self.cell_started
        if cell.get("cell_type") == "code" and took >= 10:
            self.say(f"cell {self.k}/{self.n} done in {clock(took)}")

    def write(self, text: str) -> int:
        """The kernel's stderr: each tqdm refresh (``\\r``) or line becomes one line here."""
        for part in ANSI.sub("", text).replace("\r", "\n").split("\n"):
            if part.strip() and part.rstrip() != self._previous:  # tqdm's last refresh and close repeat a line
                self._previous = part.rstrip()
                self.say(self._previous)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def _beat(self) -> None:
        while not self._stop.wait(min(5.0, self.heartbeat / 4)):
            if time.monotonic() - self.last >= self.heartbeat:
                now = time.monotonic()
                self.say(f"cell {self.k}/{self.n} still running ({clock(now - self.cell_started)} in this cell, "
                         f"{clock(now - self.start)} in the notebook): {self.cell_line}")


class IdleShutdownKernelManager(AsyncKernelManager):
    """Shuts an idle kernel down without interrupting it first.

    jupyter_client's ``shutdown_kernel`` sends SIGINT before the shutdown request. After papermill's last cell
    it has just sent ``kernel_info_request`` and waited for the reply only, so the kernel is often still inside
    that handler (where ipykernel arms SIGINT): it logs "ERROR | KeyboardInterrupt caught in kernel." with nothing
    wrong. The interrupt has nothing to stop here (a cell that ran past its timeout is interrupted by nbclient
    itself, through ``interrupt_kernel``); the shutdown request goes over the control channel, and a kernel
    that does not exit is killed after the usual wait.
    """

    _shutting_down_quietly = False

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        self._shutting_down_quietly = True
        try:
            await super().shutdown_kernel(now=now, restart=restart)
        finally:
            self._shutting_down_quietly = False

    async def _async_interrupt_kernel(self) -> None:
        if not self._shutting_down_quietly:
            await super()._async_interrupt_kernel()


class ProgressEngine(NBClientEngine):
    """papermill's nbclient engine, reporting each cell to a ``Progress`` and talking to the kernel over IPC."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, progress: Progress | None = None,
                                 **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="cachecraft-kernel-") as private:  # created 0700
            config = Config({"KernelManager": {"transport": "ipc", "ip": f"{private}/kernel"}})
            kwargs.setdefault("kernel_manager_class", IdleShutdownKernelManager)
            if not isinstance(progress, Progress):
                return super().execute_managed_notebook(nb_man, kernel_name, config=config, **kwargs)
            started, completed = nb_man.cell_start, nb_man.cell_complete

            def cell_start(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
                progress.cell_start(cell, cell_index)
                return started(cell, cell_index, **kw)

            def cell_complete(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
                progress.cell_complete(cell, cell_index)
                return completed(cell, cell_index, **kw)

            nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete
            progress.begin(nb_man.nb.cells)
            try:
                return super().execute_managed_notebook(nb_man, kernel_name, config=config, **kwargs)
            finally:
                progress.end()


papermill_engines.register(ENGINE, ProgressEngine)
