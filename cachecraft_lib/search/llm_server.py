"""A local OpenAI-compatible server for the search's LLM mutator: transformers' own ``transformers serve``.

``cachecraft evolve --mutator openai`` talks to any OpenAI-compatible endpoint (Ollama, vLLM, a hosted API).
Where none is at hand, ``InstructServer`` starts ``transformers serve`` (FastAPI + uvicorn, extra ``[serve]``)
on a model folder, by default SmolLM2-135M-Instruct converted by ``cachecraft fetch-instruct``, waits until
``/v1/models`` answers, and stops it on exit. A 135M model writes mostly unusable diffs: this server exercises
the path (what OpenEvolve sends, what it parses, every child's verdict), it does not find better policies.

``transformers serve`` samples only when the model's generation config enables ``do_sample``; the converted
SmolLM2 folder does not, so its answers are greedy (OpenEvolve's temperature is ignored, its per-iteration seed
changes nothing) and the same prompt gets the same answer.

On a CPU shared with other work, give ``threads=1``: torch's OpenMP threads spin while waiting for a busy core,
and decoding ran 20x slower with two threads than with one on this project's 2-core machine.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..models.names import INSTRUCT_DIR

INSTALL_HINT = "pip install -e '.[serve]'  (transformers serve needs FastAPI and uvicorn)"
CHAT_RE = re.compile(r'"POST /v1/chat/completions HTTP/[0-9.]+" (\d{3})')


class ServerError(RuntimeError):
    """The server could not start or answer; the message says what to do."""


def missing_dependencies() -> list[str]:
    """The packages ``transformers serve`` needs that are not installed."""
    import importlib.util

    return [name for name in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(name) is None]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class InstructServer:
    """``transformers serve`` on ``model`` at ``http://host:port/v1`` (``with InstructServer() as server: ...``).

    ``port=0`` takes a free port. The server log (uvicorn's access lines included) goes to ``log_path``
    (default: a temporary file), so ``chat_requests()`` can tell how many chat completions it answered."""

    model: str | Path = INSTRUCT_DIR
    port: int = 0
    host: str = "127.0.0.1"
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    log_path: Path | None = None
    startup_timeout_s: float = 300.0
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The ``transformers serve`` command line: the model forced on every request, never unloaded."""
        return [sys.executable, "-m", "transformers.cli.transformers", "serve", "--force-model", str(self.model),
                "--host", self.host, "--port", str(self.port), "--device", self.device, "--dtype", self.dtype,
                "--model-timeout", "-1", "--log-level", "info"]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
        if Path(self.model).is_dir():
            env["HF_HUB_OFFLINE"] = "1"  # a local folder: no hub call (transformers' CLI checks for updates)
        if self.threads:
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(self.threads)
        return env

    def start(self) -> InstructServer:
        """Start the server and wait until it answers; raises ``ServerError`` (with the log's end) if it cannot."""
        missing = missing_dependencies()
        if missing:
            raise ServerError(f"missing {', '.join(missing)}: {INSTALL_HINT}")
        if Path(self.model) == INSTRUCT_DIR and not INSTRUCT_DIR.is_dir():
            raise ServerError(f"{INSTRUCT_DIR} does not exist: run `cachecraft fetch-instruct` first")
        if _looks_like_path(self.model) and not Path(self.model).is_dir():
            raise ServerError(f"model folder {self.model} does not exist (give a folder or a hub id like owner/name)")
        _hub_cache_exists()
        self.port = self.port or free_port(self.host)
        if self.log_path is None:
            self.log_path = Path(tempfile.mkstemp(prefix="cachecraft-serve-", suffix=".log")[1])
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=self.environment())
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self) -> None:
        """Poll ``/v1/models`` until it answers 200 (the forced model is loaded before the server listens)."""
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise ServerError(f"transformers serve exited (code {code}) before answering:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise ServerError(f"transformers serve did not answer {self.base_url}/models within "
                          f"{self.startup_timeout_s:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """Ask the server to shut down (SIGTERM: uvicorn finishes cleanly), kill it if it does not; its exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.process.returncode

    def log_tail(self, lines: int = 25) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def chat_requests(self) -> list[int]:
        """The HTTP status of every chat completion the server answered (from uvicorn's access log)."""
        if self.log_path is None or not self.log_path.is_file():
            return []
        return [int(code) for code in CHAT_RE.findall(self.log_path.read_text(errors="replace"))]

    def __enter__(self) -> InstructServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _looks_like_path(model: str | Path) -> bool:
    """A folder rather than a hub id (``owner/name``)."""
    text = str(model)
    return isinstance(model, Path) or text.startswith((".", "/", "~")) or text.count("/") > 1


def _hub_cache_exists() -> None:
    """``transformers serve`` answers ``/v1/models`` by scanning the hub cache, and fails (500) if the folder is
    missing, as on a machine that never downloaded a model: create it (empty)."""
    from huggingface_hub import constants

    Path(constants.HF_HUB_CACHE).mkdir(parents=True, exist_ok=True)
