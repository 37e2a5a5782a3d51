"""A submission's method in its own long-lived process: a CPU-time limit with kill, a memory cap, no files or network.

One ``MethodSandbox`` serves a whole evaluation (every layer, context and budget): starting a process per
layer would cost more than the compression. The design follows ``search.sandbox`` (the search's policy
programs): the limit counts the child's CPU time read from ``/proc`` (out of the method's reach), so a
loaded machine never kills a valid method and a hang always is; a wall-clock backstop catches a child
blocked without using CPU. What comes back is plain bytes with a JSON header, validated here
(``validate_scores`` / ``validate_indices``); every failure is a ``SubmissionError`` with its kind.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..search.sandbox import cpu_seconds
from .method_api import SCALARS
from .submission import Submission, SubmissionError

CHILD = Path(__file__).with_name("child.py")
WALL_FACTOR, WALL_MIN_S = 20, 120.0
FLOAT_DTYPES = {"float16", "float32", "float64"}
INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
NUMBER_DTYPES = FLOAT_DTYPES | INT_DTYPES | {"bool"}


@dataclass
class Limits:
    """What one method may use: CPU seconds per layer call, memory beyond its start, seconds to load."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    load_s: float = 30.0

    @classmethod
    def of(cls, **limits: Any) -> Limits:
        unknown = set(limits) - {"timeout_s", "memory_mb", "load_s"}
        if unknown:
            raise TypeError(f"unknown sandbox limits {sorted(unknown)}; limits: timeout_s, memory_mb, load_s")
        return cls(**limits)


@dataclass
class MethodSandbox:
    """One submission's ``Method`` in one child process; ``call`` runs it on one layer."""

    submission: Submission
    limits: Limits = field(default_factory=Limits)
    calls: int = 0
    cpu_s: float = 0.0

    def start(self) -> MethodSandbox:
        env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
               "PATH": os.environ.get("PATH", "")}
        self.proc = subprocess.Popen([sys.executable, "-I", str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd="/", start_new_session=True)
        self._send({"source": self.submission.source, "returns": self.submission.returns,
                    "memory_mb": self.limits.memory_mb})
        header, _ = self._receive(self.limits.load_s)
        if not header.get("ok"):
            self.close()
            raise SubmissionError(header.get("kind", "crash"), header.get("error", "the method did not load"))
        return self

    @property
    def alive(self) -> bool:
        return getattr(self, "proc", None) is not None and self.proc.poll() is None

    def close(self) -> None:
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> MethodSandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, arrays: dict[str, np.ndarray], hook: str | None = None, **scalars: Any) -> np.ndarray:
        """The method's raw answer for one layer (validate it with ``validate_scores``/``validate_indices``);
        ``hook`` names the method called (default: the submission's ``score``/``keep``; ``decode`` on board C)."""
        if not self.alive:
            self.start()
        missing = set(SCALARS) - set(scalars)
        if missing:
            raise TypeError(f"call needs {sorted(missing)}")
        msg = {"arrays": {k: (str(a.dtype), list(a.shape), np.ascontiguousarray(a).tobytes()) for k, a in arrays.items()},
               "hook": hook, **{k: scalars[k] for k in SCALARS}}
        self._send(msg)
        try:
            header, data = self._receive(self.limits.timeout_s)
        except SubmissionError:
            self.close()
            raise
        self.calls += 1
        if not header.get("ok"):
            self.close()  # a failed method is not trusted with another call
            raise SubmissionError(header.get("kind", "crash"), f"layer {scalars['layer']}: "
                                                               f"{header.get('error', 'failed')}")
        return data

    def answer(self, arrays: dict[str, np.ndarray], **scalars: Any) -> np.ndarray:
        """The validated answer for one layer: (H_kv, L) scores or (H_kv, n) sorted indices."""
        out = self.call(arrays, **scalars)
        heads, tokens = arrays["keys"].shape[:2]
        if self.submission.returns == "scores":
            return validate_scores(out, heads, tokens)
        return validate_indices(out, heads, tokens, int(scalars["budget"]))

    def decode(self, arrays: dict[str, np.ndarray], **scalars: Any) -> np.ndarray:
        """The validated ``decode`` answer for one layer: (H_kv, n) sorted indices to keep, n <= budget.

        Float answers are scores (the ``budget`` highest per head are kept; ties keep the earlier entry);
        integer answers are the indices themselves."""
        out = self.call(arrays, hook="decode", **scalars)
        heads, tokens = arrays["keys"].shape[:2]
        budget = int(scalars["budget"])
        if out.dtype.name in FLOAT_DTYPES:
            scores = validate_scores(out, heads, tokens)
            return np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :budget], axis=1)
        return validate_indices(out, heads, tokens, budget)

    # ------------------------------------------------------------------------------------ protocol
    def _send(self, obj: Any) -> None:
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(struct.pack("<Q", len(blob)) + blob)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._death() from None

    def _receive(self, timeout: float) -> tuple[dict, np.ndarray | None]:
        """The child's JSON header and array, or ``SubmissionError`` (killed after ``timeout`` CPU seconds)."""
        fd = self.proc.stdout.fileno()
        cpu_start = cpu_seconds(self.proc.pid)
        wall_limit = max(WALL_MIN_S, WALL_FACTOR * timeout) if cpu_start is not None else timeout
        wall_end = time.monotonic() + wall_limit
        buf, header, need = b"", None, None
        while header is None or len(buf) < need:
            cpu_used = cpu_seconds(self.proc.pid)
            wall_left = wall_end - time.monotonic()
            cpu_left = timeout - (cpu_used - cpu_start) if None not in (cpu_used, cpu_start) else wall_left
            if cpu_left <= 0 or wall_left <= 0:
                self.close()
                what = f"{timeout:g} s of CPU time" if cpu_left <= 0 else f"{wall_limit:g} s of wall time"
                raise SubmissionError("timeout", f"the method gave no answer within {what}: killed")
            ready, _, _ = select.select([fd], [], [], max(0.005, min(cpu_left, wall_left, 0.5)))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                raise self._death()
            buf += chunk
            if header is None and b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                header = _header(line)
                need = int(header.get("nbytes", 0)) if header.get("ok") else 0
        if cpu_start is not None and (cpu_now := cpu_seconds(self.proc.pid)) is not None:
            self.cpu_s += cpu_now - cpu_start
        return header, _array(header, buf[:need]) if header.get("ok") and "dtype" in header else None

    def _death(self) -> SubmissionError:
        code = self.proc.wait()
        if code in (-9, 137):
            return SubmissionError("memory", f"the method's process was killed (exit code {code}): out of memory")
        return SubmissionError("crash", f"the method's process exited (exit code {code})")


def _header(line: bytes) -> dict:
    try:
        header = json.loads(line.decode())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SubmissionError("bad_output", "unreadable reply from the method's process") from None
    if not isinstance(header, dict):
        raise SubmissionError("bad_output", "unreadable reply from the method's process")
    if header.get("ok") and "dtype" in header and header.get("dtype") not in NUMBER_DTYPES:
        raise SubmissionError("bad_output", f"the method returned dtype {header.get('dtype')!r}, not numbers")
    return header


def _array(header: dict, data: bytes) -> np.ndarray:
    try:
        shape = [int(s) for s in header["shape"]]
        return np.frombuffer(data, dtype=header["dtype"]).reshape(shape).copy()
    except (ValueError, TypeError, KeyError):
        raise SubmissionError("bad_output", f"the reply's bytes do not form a {header.get('dtype')} array of "
                                            f"shape {header.get('shape')}") from None


def validate_scores(out: np.ndarray, n_heads: int, n_tokens: int) -> np.ndarray:
    """(H_kv, L) float32 finite scores from an (L,) or (H_kv, L) answer."""
    if out.dtype.name not in NUMBER_DTYPES:
        raise SubmissionError("bad_output", f"score() returned {out.dtype}, not numbers")
    if out.shape == (n_tokens,):
        out = np.broadcast_to(out, (n_heads, n_tokens))
    if out.shape != (n_heads, n_tokens):
        raise SubmissionError("bad_output", f"score() returned shape {out.shape}; expected ({n_tokens},) or "
                                            f"({n_heads}, {n_tokens})")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = out.astype(np.float32)
    if not np.isfinite(scores).all():
        raise SubmissionError("bad_output", f"score() returned {int((~np.isfinite(scores)).sum())} non-finite "
                                            "scores (NaN or inf, also after conversion to float32)")
    return np.ascontiguousarray(scores)


def validate_indices(out: np.ndarray, n_heads: int, n_tokens: int, budget: int) -> np.ndarray:
    """(H_kv, n) sorted int64 indices, unique per head, in range, 1 <= n <= budget."""
    if out.dtype.name not in INT_DTYPES:
        raise SubmissionError("bad_output", f"keep() returned {out.dtype} values; indices must be integers")
    if out.ndim == 1:
        out = np.broadcast_to(out, (n_heads, out.shape[0]))
    if out.ndim != 2 or out.shape[0] != n_heads:
        raise SubmissionError("bad_output", f"keep() returned shape {out.shape}; expected (n,) or ({n_heads}, n)")
    n = out.shape[1]
    if n > budget:
        raise SubmissionError("over_budget", f"keep() kept {n} entries per head; the budget is {budget}")
    if n == 0:
        raise SubmissionError("bad_output", "keep() kept nothing; keep at least one entry per head")
    idx = out.astype(np.int64)
    bad = idx[(idx < 0) | (idx >= n_tokens)]
    if bad.size:
        raise SubmissionError("out_of_range", f"keep() returned indices outside [0, {n_tokens}): "
                                              f"{sorted(set(bad.tolist()))[:10]}")
    idx = np.sort(idx, axis=1)
    dup = (idx[:, 1:] == idx[:, :-1])
    if dup.any():
        raise SubmissionError("duplicate_indices", f"keep() returned duplicate indices "
                                                   f"{sorted(set(idx[:, 1:][dup].tolist()))[:10]}")
    return np.ascontiguousarray(idx)
