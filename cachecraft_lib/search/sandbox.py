"""Run an untrusted policy program isolated: its own process, a hard time limit (kill), a memory cap, no network.

The trusted side (this module, in the evaluator's process) keeps the model, the data and the answers;
it sends the candidate only feature contexts and checks the returned indices with
``validate_selection`` itself, so the invariants are outside the candidate's reach.
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
    timeout_s: float = 10.0
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
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.close()
                raise CandidateFailed("timeout", f"no answer within {timeout:.0f} s: killed")
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
