"""The sandbox child: runs one untrusted policy program on feature contexts it is sent, nothing else.

Started by ``sandbox.Sandbox`` as ``python -m cachecraft_lib.search.child``. It imports what the policy
interface allows, then blocks the network, caps its address space, and executes the candidate. Protocol
on stdin/stdout: the parent sends pickled lists of layer contexts (parent -> child is trusted); the child
answers one JSON line per message (child -> parent is untrusted, so never pickle): the kept indices with
their dtype, or the error. It never sees the model, the questions or the answers.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import socket
import struct
import sys
import traceback


def _block_network() -> None:
    """Best effort: a fresh network namespace when allowed (root on Linux), and sockets that refuse anyway."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(0x40000000)  # CLONE_NEWNET; fails harmlessly without privileges
    except Exception:
        pass

    def refuse(*args, **kwargs):
        raise PermissionError("network access is not allowed in a policy program")

    socket.socket = refuse  # type: ignore[assignment]
    socket.create_connection = refuse  # type: ignore[assignment]


def _limit_memory(extra_mb: int) -> None:
    """Cap the address space at what is mapped now plus ``extra_mb`` (numpy/torch are already loaded)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    limit = pages * os.sysconf("SC_PAGE_SIZE") + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _read(stream) -> object | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


def _reply(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    import numpy as np

    import cachecraft_lib.policy  # noqa: F401  (the helpers a program may import)
    from cachecraft_lib.features import FeatureContext  # noqa: F401  (unpickling contexts)

    stdin = sys.stdin.buffer
    source = _read(stdin)
    memory_mb = int(os.environ.get("CACHECRAFT_SANDBOX_MB", "1024"))
    _block_network()
    if sys.platform.startswith("linux"):
        _limit_memory(memory_mb)
    namespace: dict = {"__name__": "candidate"}
    try:
        exec(compile(source, "candidate.py", "exec"), namespace)
    except BaseException as err:  # noqa: BLE001 - report anything the program raises at import
        _reply({"ok": False, "kind": "load", "error": f"{type(err).__name__}: {err}"})
        return
    _reply({"ok": True, "kind": "loaded"})
    while True:
        contexts = _read(stdin)
        if contexts is None:
            return
        out = []
        try:
            for ctx in contexts:
                scores = namespace["score_tokens"](ctx)
                kept = np.asarray(namespace["select_tokens_to_keep"](scores, ctx))
                out.append({"dtype": str(kept.dtype), "shape": list(kept.shape),
                            "values": kept.reshape(-1).tolist() if kept.dtype != object else None,
                            "scores_shape": list(np.shape(scores))})
        except MemoryError:
            _reply({"ok": False, "kind": "memory", "error": "MemoryError: the program exceeded its memory limit"})
            continue
        except BaseException as err:  # noqa: BLE001
            text = f"{type(err).__name__}: {err}"
            kind = "tamper" if "read-only" in text or "not writeable" in text else "crash"
            _reply({"ok": False, "kind": kind, "error": text, "trace": traceback.format_exc(limit=3)[-800:]})
            continue
        _reply({"ok": True, "kind": "selection", "layers": out})


if __name__ == "__main__":
    main()
