"""The arena's sandbox child: loads one submission's ``Method`` and answers per-layer calls, nothing else.

Started by ``sandbox.MethodSandbox`` as ``python -I child.py`` (isolated mode, only numpy and
``method_api`` imported, not the project). Before the method's code runs it:

1. moves the protocol onto private file descriptors (the method's prints go nowhere);
2. enters a fresh network namespace where allowed (root on Linux) and caps the address space (RLIMIT_AS);
3. installs an audit hook (it cannot be removed) that refuses files (``open``, ``os.*``), sockets,
   processes, ctypes, ``resource`` limits and any import beyond the allowed modules, and records the
   violation so that a method catching the refusal is still reported.

Protocol: the parent sends pickled messages (parent -> child is trusted); the child answers with one JSON
line, followed for an answer by the array's raw bytes (child -> parent is untrusted, so never pickle). The
input arrays are built on immutable bytes (read-only, and the flag cannot be set back) and hashed before and
after each call: a write attempt or a changed hash is ``tampering``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import resource
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import method_api  # noqa: E402
import numpy as np  # noqa: E402

ALLOWED = ("numpy", "math", "functools", "itertools", "collections", "heapq", "dataclasses", "typing",
           "__future__", "statistics", "bisect", "operator")
NETWORK = ("socket", "ssl", "http", "urllib", "requests", "select", "selectors", "asyncio")
OUT_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool"}
VIOLATIONS: list[tuple[str, str]] = []


def _kind_of(event: str, args: tuple) -> str | None:
    """The violation an audit event is, or None when allowed."""
    if event == "import":
        top = str(args[0]).split(".")[0]
        if top in ALLOWED or top == "method_api":
            return None
        return "network" if top in NETWORK else "file_access"
    if event.startswith(("socket.", "ssl.")) or event in ("urllib.Request",):
        return "network"
    if event == "open" or event.startswith(("os.", "shutil.", "glob.", "tempfile.", "pathlib.", "mmap.")):
        return "file_access"
    if event.startswith(("subprocess.", "ctypes.", "resource.", "sys.addaudithook", "builtins.input",
                         "_posixsubprocess", "pty.", "signal.")):
        return "file_access"
    return None


def _guard(event: str, args: tuple) -> None:
    kind = _kind_of(event, args)
    if kind is not None:
        VIOLATIONS.append((kind, f"{event}{args[:2]!r}"))
        raise PermissionError(f"{'network' if kind == 'network' else 'file and process'} access is not allowed "
                              f"in an arena method ({event})")


def _isolate(memory_mb: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).unshare(0x40000000)  # CLONE_NEWNET; fails harmlessly without privileges
    except Exception:  # noqa: BLE001
        pass
    if sys.platform.startswith("linux"):
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        limit = pages * os.sysconf("SC_PAGE_SIZE") + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for name in ALLOWED:
        if name != "__future__":
            __import__(name)
    np.linalg.norm(np.ones(3)), np.sort(np.ones(3)), np.argpartition(np.ones(3), 1)  # load lazy parts now


def _read(stream) -> object | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


def _reply(out, payload: dict, data: bytes = b"") -> None:
    out.write(json.dumps(payload).encode() + b"\n" + data)
    out.flush()


def _where(err: BaseException) -> str:
    """``method.py:LINE`` of the innermost frame in the method (no source lookup: files are closed)."""
    tb, line = err.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "method.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (method.py line {line})" if line else ""


def _layer(msg: dict) -> tuple[method_api.Layer, dict[str, str]]:
    arrays = {name: np.frombuffer(blob, dtype=dtype).reshape(shape) for name, (dtype, shape, blob) in
              msg["arrays"].items()}
    digests = {name: hashlib.blake2b(a.data, digest_size=16).hexdigest() for name, a in arrays.items()}
    return method_api.Layer(**arrays, **{k: msg[k] for k in method_api.SCALARS}), digests


def _error(err: BaseException) -> tuple[str, str]:
    text = f"{type(err).__name__}: {err}{_where(err)}"
    if VIOLATIONS:
        return VIOLATIONS[0][0], f"{text}; refused: {VIOLATIONS[0][1]}"
    if isinstance(err, MemoryError):
        return "memory", f"{text}: the method exceeded its memory limit"
    if isinstance(err, ValueError) and ("read-only" in str(err) or "WRITEABLE" in str(err)):
        return "tampering", f"{text}: the arrays a method receives are read-only"
    return "crash", text


def main() -> None:
    stdin = os.fdopen(os.dup(0), "rb")
    stdout = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0), os.dup2(null, 1)
    setup = _read(stdin)
    _isolate(int(setup["memory_mb"]))
    sys.addaudithook(_guard)
    namespace: dict = {"__name__": "method"}
    try:
        exec(compile(setup["source"], "method.py", "exec"), namespace)
        method = namespace["Method"]()
    except BaseException as err:  # noqa: BLE001 - anything the method raises while loading is its failure
        kind, text = _error(err)
        _reply(stdout, {"ok": False, "kind": kind, "error": f"loading the method: {text}"})
        return
    default = "score" if setup["returns"] == "scores" else "keep"
    _reply(stdout, {"ok": True, "kind": "loaded"})
    while (msg := _read(stdin)) is not None:
        layer, before = _layer(msg)
        name = msg.get("hook") or default
        hook = getattr(method, name, None) if name in method_api.HOOKS else None
        try:
            if hook is None:
                raise AttributeError(f"Method has no {name}(layer)")
            out = np.asarray(hook(layer))
        except BaseException as err:  # noqa: BLE001
            kind, text = _error(err)
            _reply(stdout, {"ok": False, "kind": kind, "error": text})
            continue
        after = {name: hashlib.blake2b(getattr(layer, name).data, digest_size=16).hexdigest() for name in before}
        if VIOLATIONS:
            _reply(stdout, {"ok": False, "kind": VIOLATIONS[0][0], "error": f"refused: {VIOLATIONS[0][1]}"})
        elif after != before:
            changed = sorted(n for n in before if before[n] != after[n])
            _reply(stdout, {"ok": False, "kind": "tampering", "error": f"the method changed its inputs {changed}"})
        elif out.dtype.name not in OUT_DTYPES:
            _reply(stdout, {"ok": False, "kind": "bad_output", "error": f"returned an array of {out.dtype}, "
                                                                         "not numbers"})
        else:
            data = np.ascontiguousarray(out).tobytes()
            _reply(stdout, {"ok": True, "dtype": out.dtype.name, "shape": list(out.shape), "nbytes": len(data)},
                   data)


if __name__ == "__main__":
    main()
