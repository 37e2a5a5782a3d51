"""Run an untrusted policy program isolated: its own process, a hard time limit (kill), a memory cap, no network.

The trusted side (this module, in the evaluator's process) keeps the model, the data and the answers;
it sends the candidate only feature contexts and checks the returned indices with
``validate_selection`` itself, so the invariants are outside the candidate's reach.

The time limit counts the child's CPU time (read from ``/proc``, out of the candidate's reach), not the
wall clock: a hang burns CPU and is always killed, while a valid candidate on a loaded or paused machine
is never killed, so a run's verdicts, and with them the search's next proposals, do not depend on the
machine's load. A wall-clock backstop (``WALL_FACTOR`` times the limit, at least ``WALL_MIN_S``) catches a
child blocked without using CPU; where ``/proc`` is missing (macOS) the limit falls back to the wall clock.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..policy import SelectionError, validate_selection

WALL_FACTOR, WALL_MIN_S = 30, 600.0
ALLOWED_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


class CandidateFailed(RuntimeError):
    """The candidate hung, crashed, ran out of memory, tampered with its inputs or broke an invariant."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


@dataclass
class Sandbox:
    """One candidate program in one child process; use as a context manager."""

    source: str
    timeout_s: float = 10.0  # CPU seconds per message (module doc)
    memory_mb: int = 1024

    def __enter__(self) -> Sandbox:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "OPENAI", "CACHECRAFT_SEARCH"))}
        env.update(CACHECRAFT_SANDBOX_MB=str(self.memory_mb), OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        self.proc = subprocess.Popen([sys.executable, "-m", "cachecraft_lib.search.child"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._send(self.source)
        reply = self._receive(self.timeout_s + 30)  # imports take a few seconds on a cold start
        if not reply.get("ok"):
            self.close()
            raise CandidateFailed(reply.get("kind", "load"), reply.get("error", "could not load"))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "proc", None) and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _send(self, obj: Any) -> None:
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(struct.pack("<Q", len(blob)) + blob)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise CandidateFailed("crash", "the candidate process exited") from None

    def _receive(self, timeout: float) -> dict:
        """One reply line, or ``CandidateFailed``: killed after ``timeout`` CPU seconds of the child (module doc)."""
        cpu_start = cpu_seconds(self.proc.pid)
        wall_limit = max(WALL_MIN_S, WALL_FACTOR * timeout) if cpu_start is not None else timeout
        wall_end = time.monotonic() + wall_limit
        line = b""
        while not line.endswith(b"\n"):
            wall_left = wall_end - time.monotonic()
            cpu_used = cpu_seconds(self.proc.pid)
            cpu_left = timeout - (cpu_used - cpu_start) if cpu_used is not None and cpu_start is not None else wall_left
            if cpu_left <= 0 or wall_left <= 0:
                self.close()
                what = f"{timeout:.0f} s of CPU time" if cpu_left <= 0 < wall_left else f"{wall_limit:.0f} s"
                raise CandidateFailed("timeout", f"no answer within {what}: killed")
            # the child cannot use more CPU than wall time (one thread), so waiting cpu_left loses nothing
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.01, min(cpu_left, wall_left)))
            if not ready:
                continue
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                code = self.proc.wait()
                kind = "memory" if code in (-9, 137) else "crash"
                raise CandidateFailed(kind, f"the candidate process died (exit code {code})")
            line += chunk
        try:
            return json.loads(line.decode())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise CandidateFailed("crash", "unreadable reply from the candidate process") from None

    def select_layers(self, contexts: list) -> list[np.ndarray]:
        """Validated, sorted kept indices for each layer context; raises ``CandidateFailed`` otherwise."""
        self._send(contexts)
        reply = self._receive(self.timeout_s)
        if not reply.get("ok"):
            raise CandidateFailed(reply.get("kind", "crash"), reply.get("error", "failed"))
        out = []
        for ctx, layer in zip(contexts, reply["layers"], strict=True):
            if layer["scores_shape"] != [ctx.L]:
                raise CandidateFailed("invariant", f"invariant 'scores' violated: score_tokens returned shape "
                                                   f"{layer['scores_shape']}, expected [{ctx.L}]")
            dtype = layer["dtype"] if layer["dtype"] in ALLOWED_DTYPES else "float64"
            values = layer["values"] if layer["values"] is not None else []
            try:
                arr = np.asarray(values, dtype=dtype).reshape(layer["shape"])
            except (ValueError, TypeError):
                raise CandidateFailed("invariant", "invariant 'integer' violated: indices are not numbers") from None
            if layer["dtype"] not in ALLOWED_DTYPES:
                arr = arr.astype(np.float64)  # reported by the validator as an 'integer' violation
            try:
                out.append(validate_selection(arr, ctx.L, ctx.compression_ratio, ctx.chunk_length))
            except SelectionError as err:
                raise CandidateFailed("invariant", str(err)) from None
        return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process from ``/proc/<pid>/stat`` (None where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)
