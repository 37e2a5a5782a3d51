"""The search's layer inside the sandbox: runs one policy program on the feature contexts it is sent.

Imported by ``sandbox/runtime/serve.py`` inside the boundary, where only numpy, the runtime and this file
exist: the program's ``from cachecraft_lib.policy import ...`` gets the numpy helpers of
``runtime/policy_api.py``, registered here under that name, and each context arrives as arrays and
scalars and becomes a read-only ``FeatureView``. The reply holds each layer's kept indices (checked by the
parent with ``validate_selection``). It never sees the model, the questions or the answers.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import policy_api

ALLOWED = ("numpy", "math", "functools", "itertools", "cachecraft_lib")
NUMBERS = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool"}


def prepare() -> None:
    """The program API under its usual name, and what a program may import, loaded before the guard."""
    package = types.ModuleType("cachecraft_lib")
    package.__path__ = []
    package.policy = policy_api
    sys.modules["cachecraft_lib"], sys.modules["cachecraft_lib.policy"] = package, policy_api
    for name in ALLOWED[:-1]:
        __import__(name)
    np.argsort(np.ones(3), kind="stable"), np.sort(np.ones(3))
    np.fft.rfft(np.ones(4)), np.random.default_rng(0).random(1)  # numpy 2 imports these on first use


def load(source: str, setup: dict) -> dict:
    namespace: dict = {"__name__": "candidate"}
    exec(compile(source, "candidate.py", "exec"), namespace)
    return namespace


def handle(namespace: dict, header: dict, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    layers, kept_arrays = [], {}
    for i, scalars in enumerate(header["contexts"]):
        prefix = f"{i}/"
        features = {name[len(prefix):]: a for name, a in arrays.items() if name.startswith(prefix)}
        ctx = policy_api.FeatureView(features, **scalars)
        scores = namespace["score_tokens"](ctx)
        kept = np.asarray(namespace["select_tokens_to_keep"](scores, ctx))
        layers.append({"scores_shape": [int(n) for n in np.shape(scores)], "dtype": kept.dtype.name})
        if kept.dtype.name in NUMBERS:
            kept_arrays[str(i)] = kept
    return {"ok": True, "kind": "selection", "layers": layers}, kept_arrays


def classify(err: BaseException, loading: bool = False) -> tuple[str, str]:
    text = f"{type(err).__name__}: {err}"
    if loading:
        return "load", text
    if isinstance(err, MemoryError):
        return "memory", "MemoryError: the program exceeded its memory limit"
    if "read-only" in text or "not writeable" in text:
        return "tamper", text
    return "crash", text
