"""The sandbox's wire format, one implementation for both sides: a JSON header line, then raw bytes.

A frame is ``<JSON object>\\n`` followed by exactly ``header["nbytes"]`` bytes. Arrays travel as raw bytes
described in the header (``"arrays": [[name, dtype, shape], ...]``), never pickled: the child's replies are
untrusted, so everything the parent reads is parsed here with bounds (header size, JSON nesting, payload
size, dtypes, shapes that must match the bytes) and every violation is a ``FrameError``, never another
exception. This module is imported by the parent (``cachecraft_lib.sandbox.runtime.frames``) and, alone,
by the child inside the sandbox (``frames``), so it depends on numpy and the standard library only.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

MAX_HEADER = 64 * 1024  # bytes of one header line
MAX_DEPTH = 8  # JSON nesting a header may have
MAX_PAYLOAD = 1 << 30  # bytes after one header
MAX_TEXT = 2000  # characters of an error text kept
DTYPES = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                    "uint32", "uint64", "bool"})


class FrameError(ValueError):
    """A frame that breaks the format: the reply is refused as ``protocol``."""


def clean_text(text: Any, limit: int = MAX_TEXT) -> str:
    """``text`` as at most ``limit`` printable characters: control characters escaped, the rest cut."""
    raw = text if isinstance(text, str) else repr(text)
    head = raw[: limit + 1]
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in head)
    return escaped[:limit] + " ... (cut)" if len(raw) > limit or len(escaped) > limit else escaped


def encode(header: dict, arrays: dict[str, np.ndarray] | None = None, payload: bytes = b"") -> bytes:
    """One frame: ``header`` plus the arrays' bytes (after ``payload``), ``nbytes`` set here."""
    blobs, specs = [payload], []
    for name, array in (arrays or {}).items():
        array = np.ascontiguousarray(array)
        specs.append([name, array.dtype.name, list(array.shape)])
        blobs.append(array.tobytes())
    body = b"".join(blobs)
    head = {**header, "arrays": specs, "text_nbytes": len(payload), "nbytes": len(body)}
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + body


def parse_header(line: bytes) -> dict:
    """The header object of one line (without its newline), checked; ``FrameError`` otherwise, whatever is wrong
    with it (a check that raised anything else would let a malformed reply past the caller's handling)."""
    try:
        return _parse_header(line)
    except FrameError:
        raise
    except Exception as err:  # noqa: BLE001 (untrusted input: every failure is a protocol failure)
        raise FrameError(f"a header that could not be read ({type(err).__name__})") from None


def _parse_header(line: bytes) -> dict:
    if len(line) > MAX_HEADER:
        raise FrameError(f"a header of {len(line)} bytes (at most {MAX_HEADER})")
    if _depth(line) > MAX_DEPTH:
        raise FrameError(f"a header nested deeper than {MAX_DEPTH} levels")
    try:
        header = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        raise FrameError("a header that is not JSON") from None
    if not isinstance(header, dict):
        raise FrameError("a header that is not a JSON object")
    nbytes, text = header.get("nbytes", 0), header.get("text_nbytes", 0)
    for value in (nbytes, text):
        if type(value) is not int or not 0 <= value <= MAX_PAYLOAD:
            raise FrameError(f"a payload size {clean_text(value, 40)} (an integer in [0, {MAX_PAYLOAD}])")
    if text > nbytes:
        raise FrameError("a text size larger than the payload")
    header.setdefault("nbytes", 0)
    _check_specs(header.get("arrays", []), nbytes - text)
    return header


def _depth(line: bytes) -> int:
    """The deepest bracket nesting in ``line`` (an upper bound on the JSON's; strings are not skipped)."""
    depth = deepest = 0
    for byte in line.translate(None, delete=bytes(b for b in range(256) if b not in b"[]{}")):
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _check_specs(specs: Any, nbytes: int) -> None:
    if not isinstance(specs, list):
        raise FrameError("an array list that is not a list")
    total = 0
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str)
                and isinstance(spec[1], str) and spec[1] in DTYPES
                and isinstance(spec[2], list) and all(type(s) is int and 0 <= s <= MAX_PAYLOAD for s in spec[2])):
            raise FrameError(f"an array description {clean_text(spec, 200)} ([name, dtype of numbers, shape])")
        total += math.prod(spec[2]) * np.dtype(spec[1]).itemsize
        if total > nbytes:
            break
    if total != nbytes:
        raise FrameError(f"arrays of {total} bytes in a payload of {nbytes}")


def decode(header: dict, body: bytes) -> tuple[str, dict[str, np.ndarray]]:
    """The text and the read-only arrays of a frame whose header passed ``parse_header``."""
    text_n = header.get("text_nbytes", 0)
    text = body[:text_n].decode("utf-8", errors="replace")
    arrays, offset = {}, text_n
    for name, dtype, shape in header.get("arrays", []):
        size = math.prod(shape) * np.dtype(dtype).itemsize
        arrays[name] = np.frombuffer(body, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
        offset += size
    return text, arrays


def read_blocking(stream: Any) -> tuple[dict, bytes] | None:
    """The next frame from a trusted buffered stream (the child reading the parent); None at end of input."""
    line = stream.readline(MAX_HEADER + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise FrameError("a header without end")
    header = parse_header(line[:-1])
    body = stream.read(header["nbytes"])
    return (header, body) if len(body) == header["nbytes"] else None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Reader:
    """Frames from an untrusted stream, fed chunk by chunk; bounded in memory and CPU (``FrameError``)."""

    def __init__(self, max_payload: int = MAX_PAYLOAD) -> None:
        self.buf, self.header, self.max_payload = bytearray(), None, max_payload

    def feed(self, chunk: bytes) -> tuple[dict, bytes] | None:
        """Add ``chunk``; the completed frame, if this chunk completes one."""
        self.buf += chunk
        if self.header is None:
            end = self.buf.find(b"\n", 0, MAX_HEADER + 1)
            if end < 0:
                if len(self.buf) > MAX_HEADER:
                    raise FrameError(f"a header without end within {MAX_HEADER} bytes")
                return None
            self.header = parse_header(bytes(self.buf[:end]))
            if self.header["nbytes"] > self.max_payload:
                raise FrameError(f"a payload of {self.header['nbytes']} bytes (at most {self.max_payload})")
            del self.buf[: end + 1]
        need = self.header["nbytes"]
        if len(self.buf) < need:
            return None
        if len(self.buf) > need:
            raise FrameError("bytes after the frame (one reply per request)")
        frame, self.header, self.buf = (self.header, bytes(self.buf)), None, bytearray()
        return frame

    def finish(self) -> None:
        """The stream ended: ``FrameError`` if it ended inside a frame (a cut header or payload)."""
        if self.header is not None or self.buf:
            raise FrameError("the stream ended inside a frame")
