"""The parent never breaks on what the sandbox sends back: every malformed frame is a ``protocol`` refusal
(``SubmissionError`` in the arena, ``CandidateFailed`` in the search), bounded in time, memory and text."""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time

import numpy as np
import pytest
from sandbox_helpers import SCALARS, layer_arrays, submission

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.arena.submissions.sandbox import MethodSandbox
from cachecraft_lib.sandbox import Failure, FrameError
from cachecraft_lib.sandbox.runtime import frames
from cachecraft_lib.sandbox.watch import Process
from cachecraft_lib.search.sandbox import CandidateFailed, Sandbox

GOOD = frames.encode({"ok": True}, {"out": np.ones((2, 48), np.float32)})
MALFORMED = [
    b"not json\n",
    b"[1, 2, 3]\n",
    b"{" * 100_000 + b"\n",  # a header nested deeper than Python's recursion limit
    b'{"ok": true' + b" " * 200_000,  # a header without end
    b'{"ok": true, "nbytes": -5, "arrays": []}\n',
    b'{"ok": true, "nbytes": 99999999999999999999, "arrays": []}\n',
    b'{"ok": true, "nbytes": 1.5, "arrays": []}\n',
    b'{"ok": true, "nbytes": 8, "arrays": [["out", "float32", [4]]]}\n' + b"\0" * 8 + b"extra",
    b'{"ok": true, "nbytes": 8, "arrays": [["out", "float32", [3]]]}\n' + b"\0" * 8,
    b'{"ok": true, "nbytes": 8, "arrays": [["out", "object", [1]]]}\n' + b"\0" * 8,
    b'{"ok": true, "nbytes": 8, "arrays": [["out", "float64", [-1]]]}\n' + b"\0" * 8,
    b'{"ok": true, "nbytes": 8, "arrays": [["out", "float64", [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]]}\n',
    b'{"ok": true, "nbytes": 8, "arrays": "out"}\n' + b"\0" * 8,
    b'{"ok": false, "kind": "accepted", "error": "ok"}\n',
    b'{"ok": false, "kind": ["crash"], "error": "ok"}\n',
    b'{"ok": false, "kind": "crash", "error": {"a": 1}}\n',
    b'{"ok": true, "nbytes": 0, "arrays": []}\n',
    b"\xff\xfe\n",
    b"\n",
]


def random_frames(n: int, seed: int = 0) -> list[bytes]:
    """Random bytes, and good frames with random bytes flipped, cut or appended."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        base = bytearray(GOOD)
        how = rng.randrange(4)
        if how == 0:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) + b"\n")
            continue
        if how == 1:
            for _ in range(rng.randrange(1, 6)):
                base[rng.randrange(len(base))] = rng.randrange(256)
        elif how == 2:
            base = base[: rng.randrange(1, len(base))]
        else:
            base += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50)))
        out.append(bytes(base))
    return out


def test_the_reader_refuses_every_malformed_frame_with_frame_error_only():
    for data in MALFORMED + random_frames(3000):
        start = time.process_time()
        reader = frames.Reader(max_payload=1 << 20)
        try:
            frame = reader.feed(data)
            if frame is not None:
                frames.decode(*frame)
        except FrameError as err:
            assert len(str(err)) < 2100
        assert time.process_time() - start < 0.5


def _replying(data: bytes) -> Process:
    """A stand-in child that answers the first request with ``data`` and stops."""
    with tempfile.NamedTemporaryFile("wb", suffix=".reply", delete=False) as f:
        f.write(data)
    script = ("import os, sys; sys.stdin.buffer.readline(); data = open(sys.argv[1], 'rb').read(); "
              "os.unlink(sys.argv[1]); os.write(1, data) if len(data) < 65536 else sys.stdout.buffer.write(data); "
              "sys.stdout.flush(); os.close(1); sys.stdin.buffer.read()")
    return Process([sys.executable, "-I", "-c", script, f.name], None)


@pytest.fixture
def method_box(tmp_path):
    box = MethodSandbox(submission(tmp_path, "class Method:\n    def score(self, layer):\n        return 0\n"))
    yield box
    box.close()


def test_the_arena_refuses_every_malformed_reply_as_protocol(method_box):
    for data in MALFORMED + random_frames(20, seed=1):
        method_box._box.process, method_box._box.baseline_pids = _replying(data), 0
        start = time.monotonic()
        try:
            method_box.call(layer_arrays(), **SCALARS)
        except SubmissionError as err:
            assert err.kind in ("protocol", "crash", "bad_output"), (data[:80], err)
            assert len(str(err)) < 2200 and "\x00" not in str(err)
        assert time.monotonic() - start < 10
    method_box._box.process = _replying(MALFORMED[2])
    with pytest.raises(SubmissionError) as err:
        method_box.call(layer_arrays(), **SCALARS)
    assert err.value.kind == "protocol"


def test_a_huge_error_text_comes_back_cut_and_escaped(method_box):
    reply = frames.encode({"ok": False, "kind": "crash", "error": "\x1b[31m" + "A" * 20_000_000})
    method_box._box.process, method_box._box.baseline_pids = _replying(reply), 0
    with pytest.raises(SubmissionError) as err:
        method_box.call(layer_arrays(), **SCALARS)
    assert err.value.kind == "protocol" and len(str(err.value)) < 200  # a 20 MB header is not read at all
    short = frames.encode({"ok": False, "kind": "crash", "error": "\x1b[31m" + "A" * 50_000})
    method_box._box.process = _replying(short)
    with pytest.raises(SubmissionError) as err:
        method_box.call(layer_arrays(), **SCALARS)
    assert err.value.kind == "crash" and len(str(err.value)) < 2100 and "\x1b" not in str(err.value)


def test_the_search_refuses_every_malformed_reply_as_protocol():
    from test_sandbox_search import context

    box = Sandbox("unused")
    try:
        for data in MALFORMED + random_frames(15, seed=2) + [b'{"ok": true, "layers": 5, "nbytes": 0}\n',
                                                             b'{"ok": true, "layers": [7], "nbytes": 0}\n']:
            box._box.process, box._box.baseline_pids = _replying(data), 0
            try:
                box.select_layers([context()])
            except CandidateFailed as err:
                assert err.kind in ("protocol", "crash", "invariant"), (data[:80], err)
    finally:
        box.close()


def test_clean_text_bounds_and_escapes():
    assert frames.clean_text("a\x00b\n") == "a\\x00b\\n"
    assert len(frames.clean_text("x" * 10**6)) <= 2000 + 10
    assert frames.clean_text(json.dumps([1])) == "[1]"


def test_failure_texts_are_bounded():
    assert len(str(Failure("crash", "y" * 10**6))) < 2100
