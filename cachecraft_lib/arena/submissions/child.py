"""The arena's layer inside the sandbox: loads one submission's ``Method`` and answers per-layer calls.

Imported by ``sandbox/runtime/serve.py`` inside the boundary (only numpy, this file and ``method_api``
are there; see ``cachecraft_lib.sandbox``). A request carries one layer's arrays (read-only views of
immutable bytes) and scalars; the reply is the method's answer as an array. The inputs are hashed before
and after each call: a changed hash (or a write attempt) is ``tampering``.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

import method_api
import numpy as np

ALLOWED = ("numpy", "math", "functools", "itertools", "collections", "heapq", "dataclasses", "typing",
           "__future__", "statistics", "bisect", "operator", "method_api")
OUT_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool"}


def prepare() -> None:
    """Import what a method may use now, before the guard and the untrusted code."""
    for name in ALLOWED:
        if name != "__future__":
            __import__(name)
    np.linalg.norm(np.ones(3)), np.sort(np.ones(3)), np.argpartition(np.ones(3), 1)  # load lazy parts now
    np.fft.rfft(np.ones(4)), np.random.default_rng(0).random(1)  # numpy 2 imports these on first use


LOADS_ARRAYS = True  # serve.py passes the setup frame's arrays (the submission's parameters) to load


def load(source: str, setup: dict, arrays: dict | None = None) -> tuple[Any, str]:
    """The method, built with its parameters (``Method(params)``: a read-only mapping of read-only arrays) when
    the submission ships ``params.npz``, with no argument otherwise (as before the hook existed)."""
    namespace: dict = {"__name__": "method"}
    exec(compile(source, "method.py", "exec"), namespace)
    params = {k[len("param:"):]: v for k, v in (arrays or {}).items() if k.startswith("param:")}
    for a in params.values():
        a.setflags(write=False)
    cls = namespace["Method"]
    method = cls(types.MappingProxyType(params)) if setup.get("params") else cls()
    return [method, "score" if setup["returns"] == "scores" else "keep", (source, setup, arrays)]


def _digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    return {name: hashlib.blake2b(a.data, digest_size=16).hexdigest() for name, a in arrays.items()}


def handle(state: list, header: dict, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    if header.get("hook") == "whole_cache":
        return handle_whole(state[0], header, arrays)
    if header.get("hook") == "keep_context":
        return handle_context(state, header, arrays)
    method, default = state[0], state[1]
    layer = method_api.Layer(**arrays, **{k: header[k] for k in method_api.SCALARS})
    before = _digests(arrays)
    name = header.get("hook") or default
    hook = getattr(method, name, None) if name in method_api.HOOKS else None
    if hook is None:
        raise AttributeError(f"Method has no {name}(layer)")
    answer = hook(layer)
    after = _digests({name: getattr(layer, name) for name in before})
    if after != before:
        changed = sorted(n for n in before if before[n] != after[n])
        return {"ok": False, "kind": "tampering", "error": f"the method changed its inputs {changed}"}, {}
    parts = {"out": answer}
    if isinstance(answer, method_api.Rewrite):
        parts = {"out": answer.indices, "keys": answer.keys, "values": answer.values}
    out = {k: np.asarray(v) for k, v in parts.items() if v is not None}
    for part, array in out.items():
        if array.dtype.name not in OUT_DTYPES:
            return {"ok": False, "kind": "bad_output", "error": f"returned {part} of {array.dtype}, not numbers"}, {}
    return {"ok": True}, out


def handle_whole(method: Any, header: dict, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """``whole_cache(layers)``: every layer's ``Layer`` at once; one answer per layer back (``out.<layer>``)."""
    n = int(header["n_layers"])
    layers = tuple(method_api.Layer(**{a: arrays[f"{a}.{i}"] for a in method_api.ARRAYS}, budget=header["budget"],
                                    layer=i, n_layers=n, compression_ratio=header["compression_ratio"])
                   for i in range(n))
    before = _digests(arrays)
    answers = method.whole_cache(layers)
    if _digests(arrays) != before or any(getattr(layers[int(k.rsplit(".", 1)[1])], k.rsplit(".", 1)[0]) is not a
                                         for k, a in arrays.items()):
        return {"ok": False, "kind": "tampering", "error": "whole_cache() changed its inputs"}, {}
    if not isinstance(answers, (list, tuple)) or len(answers) != n:
        return {"ok": False, "kind": "bad_output", "error": f"whole_cache() must return a list of {n} answers, "
                                                            f"one per layer; got {type(answers).__name__}"}, {}
    out = {}
    for i, answer in enumerate(answers):
        parts = {"out": answer}
        if isinstance(answer, method_api.Rewrite):  # indices with new contents for the kept entries
            parts = {"out": answer.indices, "keys": answer.keys, "values": answer.values}
        for part, value in parts.items():
            if value is None:
                continue
            array = np.asarray(value)
            if array.dtype.name not in OUT_DTYPES:
                return {"ok": False, "kind": "bad_output", "error": f"whole_cache() layer {i}: {part} of "
                                                                    f"{array.dtype}, not numbers"}, {}
            out[f"{part}.{i}"] = array
    return {"ok": True}, out


def reload(state: list) -> None:
    """A fresh ``Method`` from a fresh namespace of the same source (``handle_context`` calls it before each
    context instead of a new sandbox: the method's own state, ``self`` and its module's globals, is gone)."""
    state[:2] = load(*state[2])[:2]


def handle_features(method: Any, header: dict, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """A converted policy program's selection for each of a layer's budgets from features built outside
    (``Method.keep_features``; the search's population path, ``search.policy_batch``). ``f.<name>`` is a
    feature shared by every budget, ``f.<name>.<j>`` budget ``j``'s own; one answer ``out.<j>`` per budget."""
    hook = getattr(method, "keep_features", None)
    if hook is None:
        raise AttributeError("Method has no keep_features(features, ...): not a converted policy program")
    before = _digests(arrays)
    out = {}
    for j, budget in enumerate(header["budgets"]):
        features = {n: arrays[f"f.{n}.{j}"] if f"f.{n}.{j}" in arrays else arrays[f"f.{n}"]
                    for n in header["features"]}
        answer = np.asarray(hook(features, int(header["n_tokens"]), int(budget), int(header["heads"]),
                                 int(header["queries"]), int(header["layer"]), float(header["ratios"][j])))
        if answer.dtype.name not in OUT_DTYPES:
            return {"ok": False, "kind": "bad_output", "error": f"budget {budget}: returned {answer.dtype}"}, {}
        out[f"out.{j}"] = answer
    if _digests(arrays) != before:
        return {"ok": False, "kind": "tampering", "error": "keep_features() changed its inputs"}, {}
    return {"ok": True}, out


def handle_context(state: list, header: dict, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """A fresh ``Method`` (``reload``), then ``handle_features`` for every layer of one context in order: one
    round trip per context instead of one per layer. Layer ``i``'s arrays are ``<i>:f.<name>[.<j>]`` and its
    scalars ``header["layers"][i]``; its answers come back as ``<i>:out.<j>``."""
    reload(state)
    out = {}
    for i, layer_header in enumerate(header["layers"]):
        prefix = f"{i}:"
        mine = {k[len(prefix):]: a for k, a in arrays.items() if k.startswith(prefix)}
        reply, answers = handle_features(state[0], layer_header, mine)
        if not reply.get("ok"):
            return reply, {}
        out.update({prefix + k: a for k, a in answers.items()})
    return {"ok": True}, out


def _where(err: BaseException) -> str:
    """``method.py:LINE`` of the innermost frame in the method (no source lookup: files are closed)."""
    tb, line = err.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "method.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (method.py line {line})" if line else ""


def classify(err: BaseException, loading: bool = False) -> tuple[str, str]:
    text = f"{type(err).__name__}: {err}{_where(err)}"
    if isinstance(err, MemoryError):
        return "memory", f"{text}: the method exceeded its memory limit"
    if isinstance(err, ValueError) and ("read-only" in str(err) or "WRITEABLE" in str(err)):
        return "tampering", f"{text}: the arrays a method receives are read-only"
    return "crash", text
