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
# frames that break the wire format: the reader itself refuses each (FrameError)
FRAME_MALFORMED = [
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
    b"\xff\xfe\n",
    b"\n",
    # a value of another JSON type where the reader expects a string, a number or a list (once a TypeError that
    # escaped the parent's handling and left the sandbox running unwatched: red team, 2026-12-07)
    b'{"ok": true, "nbytes": 0, "arrays": [["out", ["float32"], [1]]]}\n',
    b'{"ok": true, "nbytes": 0, "arrays": [["out", {"a": 1}, [1]]]}\n',
    b'{"ok": true, "nbytes": 4, "arrays": [["out", null, [1]]]}\n' + b"\0" * 4,
    b'{"ok": true, "nbytes": 4, "arrays": [[["out"], "float32", [1]]]}\n' + b"\0" * 4,
    b'{"ok": true, "nbytes": 4, "arrays": [["out", "float32", [[1]]]]}\n' + b"\0" * 4,
    b'{"ok": true, "nbytes": 4, "arrays": [["out", "float32", [true]]]}\n' + b"\0" * 4,
    b'{"ok": true, "nbytes": true, "arrays": []}\n',
]
# well-formed frames that are not a reply: the arena and the search refuse each as ``protocol``
REPLY_MALFORMED = [
    b'{"ok": false, "kind": "accepted", "error": "ok"}\n',
    b'{"ok": false, "kind": ["crash"], "error": "ok"}\n',
    b'{"ok": false, "kind": "crash", "error": {"a": 1}}\n',
    b'{"ok": true, "nbytes": 0, "arrays": []}\n',
]
MALFORMED = FRAME_MALFORMED + REPLY_MALFORMED
STRUCTURE = b'{}[]:,"\n'


def random_frames(n: int, seed: int = 0) -> list[bytes]:
    """Frames that are malformed by construction: a good frame cut short, with bytes after it, with a byte of its
    JSON structure replaced by a letter, with its payload size changed, or a line that cannot be a JSON object."""
    rng = random.Random(seed)
    header_end = GOOD.index(b"\n")
    structure = [i for i in range(header_end + 1) if GOOD[i] in STRUCTURE]
    size = GOOD.index(b'"nbytes":') + len(b'"nbytes":')
    out = []
    for _ in range(n):
        how = rng.randrange(5)
        if how == 0:
            out.append(GOOD[: rng.randrange(1, len(GOOD))])
        elif how == 1:
            out.append(GOOD + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50))))
        elif how == 2:
            at = rng.choice(structure)
            out.append(GOOD[:at] + bytes([rng.randrange(ord("a"), ord("z") + 1)]) + GOOD[at + 1:])
        elif how == 3:
            digits = GOOD[size:].split(b"}", 1)[0]
            wrong = str(int(digits) + rng.choice([-9, -1, 1, 8, 10**6])).encode()
            out.append(GOOD[:size] + wrong + GOOD[size + len(digits):])
        else:
            first = bytes([rng.choice([b for b in range(33, 256) if b not in b"{"])])
            out.append(first + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400))) + b"\n")
    return out


def typed_frames(n: int, seed: int = 0) -> list[bytes]:
    """The good frame's header with one value (at any depth) replaced by a JSON value of another type: the class
    of the type-confused header, beyond the examples above."""
    rng = random.Random(seed)
    header_end = GOOD.index(b"\n")
    pool = [None, True, False, 1.5, -1, 2**70, "x", "float32", [], {}, ["float32"], {"a": 1}, [[1]], [None]]
    out = []
    for _ in range(n):
        header = json.loads(GOOD[:header_end])
        spots = [(header, k) for k in header] + [(header["arrays"], 0)] + [(header["arrays"][0], i) for i in range(3)]
        spots += [(header["arrays"][0][2], i) for i in range(2)]
        parent, key = rng.choice(spots)
        value = rng.choice([v for v in pool if type(v) is not type(parent[key])])
        parent[key] = value
        out.append(json.dumps(header).encode() + GOOD[header_end:])
    return out


def test_the_reader_refuses_every_malformed_frame_with_frame_error_only():
    """Every frame here is malformed: feeding it and ending the stream must raise FrameError (a reader that
    waits for more, returning None, has not refused it), bounded in CPU and text."""
    typed = [f for f in typed_frames(600) if not _a_reply_frame(f)]
    for data in FRAME_MALFORMED + random_frames(3000) + typed:
        start = time.process_time()
        reader = frames.Reader(max_payload=1 << 20)
        with pytest.raises(FrameError) as err:
            frame = reader.feed(data)
            reader.finish()
            if frame is not None:
                frames.decode(*frame)
        assert len(str(err.value)) < 2100, data[:80]
        assert time.process_time() - start < 0.5


def _a_reply_frame(data: bytes) -> bool:
    """Whether a typed frame still passes the wire format (only its ``ok`` changed: the reply's check refuses it)."""
    header = json.loads(data[:data.index(b"\n")])
    return header.get("arrays") == json.loads(GOOD[:GOOD.index(b"\n")])["arrays"] and \
        type(header.get("nbytes")) is int and type(header.get("text_nbytes")) is int and header["nbytes"] == 384


def test_the_reader_accepts_the_good_frame_in_any_chunks():
    """The control: the reader is not refusing everything."""
    for cut in (1, 7, len(GOOD) // 2, len(GOOD) - 1):
        reader = frames.Reader()
        assert reader.feed(GOOD[:cut]) is None
        header, body = reader.feed(GOOD[cut:])
        reader.finish()
        assert header["ok"] is True and frames.decode(header, body)[1]["out"].shape == (2, 48)


def _replying(data: bytes) -> Process:
    """A stand-in child that answers the first request with ``data`` and stops."""
    with tempfile.NamedTemporaryFile("wb", suffix=".reply", delete=False) as f:
        f.write(data)
    script = ("import os, sys; sys.stdin.buffer.readline(); data = open(sys.argv[1], 'rb').read(); "
              "os.unlink(sys.argv[1]); os.write(1, data) if len(data) < 65536 else sys.stdout.buffer.write(data); "
              "sys.stdout.flush(); os.close(1)")
    return Process([sys.executable, "-I", "-c", script, f.name], None)


@pytest.fixture
def method_box(tmp_path):
    box = MethodSandbox(submission(tmp_path, "class Method:\n    def score(self, layer):\n        return 0\n"))
    yield box
    box.close()


def test_the_arena_refuses_every_malformed_reply_as_protocol(method_box):
    """Each reply must be refused (an accepted one fails the test): ``protocol`` for a reply the reader refuses
    or that is not a reply, ``crash`` for one cut short by the child's end."""
    for data in MALFORMED + random_frames(20, seed=1) + typed_frames(20, seed=1):
        method_box._box.process, method_box._box.baseline_pids = _replying(data), 0
        start = time.monotonic()
        with pytest.raises(SubmissionError) as err:
            method_box.call(layer_arrays(), **SCALARS)
        assert err.value.kind in ("protocol", "crash"), (data[:80], err.value)
        assert method_box._box.process is None or not method_box._box.process.alive  # never left running
        assert data not in REPLY_MALFORMED or err.value.kind == "protocol", (data[:80], err.value)
        assert len(str(err.value)) < 2200 and "\x00" not in str(err.value)
        assert time.monotonic() - start < 10
    method_box._box.process = _replying(GOOD)  # the control: a good reply is accepted
    assert method_box.call(layer_arrays(), **SCALARS).shape == (2, 48)


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
        for data in MALFORMED + random_frames(15, seed=2) + typed_frames(15, seed=2) + [b'{"ok": true, "layers": 5, "nbytes": 0}\n',
                                                             b'{"ok": true, "layers": [7], "nbytes": 0}\n']:
            box._box.process, box._box.baseline_pids = _replying(data), 0
            with pytest.raises(CandidateFailed) as err:
                box.select_layers([context()])
            assert err.value.kind in ("protocol", "crash"), (data[:80], err.value)
    finally:
        box.close()


def test_clean_text_bounds_and_escapes():
    assert frames.clean_text("a\x00b\n") == "a\\x00b\\n"
    assert len(frames.clean_text("x" * 10**6)) <= 2000 + 10
    assert frames.clean_text(json.dumps([1])) == "[1]"


def test_failure_texts_are_bounded():
    assert len(str(Failure("crash", "y" * 10**6))) < 2100
