"""A submission's fitted parameters: one ``params.npz`` beside ``method.py``, checked before anything runs.

Why a file and not literals in ``method.py``: a fitted model (kvprior's ridge weights) is data, and pasting it into
code hides it from review and bloats the code the judges read. The file is untrusted, so it is read here, outside
the sandbox, with every door a ``.npz`` can open closed: at most ``MAX_PARAMS_BYTES`` on disk and
``MAX_PARAMS_UNPACKED`` unpacked (a zip bomb is refused before it is inflated), at most ``MAX_ARRAYS`` arrays named
like identifiers, loaded with ``allow_pickle=False`` (an object array is refused, never unpickled), numeric dtypes
only, every float finite. Every member's ``.npy`` header is read first (``_check_headers``, numpy's own safe
header parser) and must tell the truth before any array is built: a numeric dtype, at most
``MAX_PARAMS_UNPACKED`` bytes of data, and exactly as many bytes in the archive as the header and its shape say
(a header claiming terabytes, or a member that is not an ``.npy`` array, is refused unread). ``load_params`` returns the bytes (hashed into ``Submission.params_sha256``, for the
ledger entry and the judges' bundle) and the arrays; the sandbox gets the arrays as raw frames, read-only, and the
method's constructor receives them (``Method(params)``).
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path

import numpy as np

from .errors import SubmissionError
from .safe_files import read_member

PARAMS_FILE = "params.npz"
MAX_PARAMS_BYTES = 16 * 1024 * 1024
MAX_PARAMS_UNPACKED = 64 * 1024 * 1024
MAX_ARRAYS = 256
NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats (no complex, strings, objects, records)
ARRAY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_HEADER_BYTES = 4096  # an .npy header is ~128 bytes; numpy's own limit is 10,000
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)  # what numpy.savez and savez_compressed write


def _refuse(message: str):
    return SubmissionError("bad_params", f"{PARAMS_FILE} {message}")


def params_bytes(folder: str | Path) -> bytes:
    """The bytes of ``folder``'s ``params.npz`` (``b""`` when it ships none); refused when unsafe or over the cap."""
    raw = read_member(folder, PARAMS_FILE, MAX_PARAMS_BYTES, "bad_params")
    return raw or b""


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header bytes) of one member's ``.npy`` header, read without building the array."""
    fmt = np.lib.format
    with zf.open(info) as fp:
        version = fmt.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(fp, max_header_size=MAX_HEADER_BYTES)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(fp, max_header_size=MAX_HEADER_BYTES)
        else:
            raise ValueError(f"npy version {version}")
        return tuple(shape), dtype, fp.tell()


def _check_headers(zf: zipfile.ZipFile) -> None:
    """Every member is an ``.npy`` array whose header tells the truth (see the module doc), before any is built."""
    names = [i.filename for i in zf.infolist()]
    if len(set(names)) != len(names):
        raise _refuse("names one member twice; write it with numpy.savez")
    for info in zf.infolist():
        name = info.filename[:-4] if info.filename.endswith(".npy") else None
        if name is None or not ARRAY_NAME.match(name):
            raise _refuse("holds a member that is not an array named like an identifier (NAME.npy); write it "
                          "with numpy.savez")
        if info.compress_type not in ZIP_METHODS or info.flag_bits & 0x1:
            raise _refuse(f"array {name!r} is encrypted or compressed other than by numpy.savez_compressed")
        try:
            shape, dtype, start = _header(zf, info)
        except Exception:  # noqa: BLE001 - any header numpy cannot read is a refusal, never a traceback
            raise _refuse(f"array {name!r} has no readable .npy header; write it with numpy.savez") from None
        if dtype.hasobject or dtype.kind not in NUMERIC_KINDS or dtype.fields is not None:
            raise _refuse(f"array {name!r} has a dtype that is not bool, integer or float (objects are never "
                          "unpickled)")
        size = dtype.itemsize
        for n in shape:
            size *= int(n)
        if size > MAX_PARAMS_UNPACKED:
            raise _refuse(f"array {name!r} claims {size} bytes; at most {MAX_PARAMS_UNPACKED}")
        if info.file_size != start + size:
            raise _refuse(f"array {name!r} has a header that does not match its data ({info.file_size - start} "
                          f"bytes for a shape of {size} bytes); write it with numpy.savez")


def parse_params(raw: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file's bytes, read-only and contiguous; ``SubmissionError("bad_params")`` for any
    file that is not a small bundle of finite numeric arrays."""
    if len(raw) > MAX_PARAMS_BYTES:
        raise _refuse(f"is {len(raw)} bytes; the cap is {MAX_PARAMS_BYTES}")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise _refuse(f"is not an npz archive ({type(err).__name__}); write it with numpy.savez or "
                      "savez_compressed") from None
    if len(infos) > MAX_ARRAYS:
        raise _refuse(f"holds {len(infos)} arrays; at most {MAX_ARRAYS}")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > MAX_PARAMS_UNPACKED:
        raise _refuse(f"unpacks to {unpacked} bytes; at most {MAX_PARAMS_UNPACKED}")
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        _check_headers(zf)
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            for name in npz.files:
                if not ARRAY_NAME.match(name):
                    raise _refuse(f"names an array {name[:40]!r}; names are identifiers (letters, digits, _)")
                array = npz[name]
                _check_array(name, array)
                array = np.ascontiguousarray(array)
                array.setflags(write=False)
                out[name] = array
    except ValueError as err:
        if getattr(err, "kind", None) == "bad_params":
            raise
        raise _refuse(f"cannot be loaded without pickle ({type(err).__name__}); ship numeric arrays only") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, MemoryError, RuntimeError) as err:
        raise _refuse(f"is damaged ({type(err).__name__}); write it again with numpy.savez") from None
    if not out:
        raise _refuse("holds no arrays; ship none rather than an empty file")
    return out


def _check_array(name: str, array: np.ndarray) -> None:
    if array.dtype.kind not in NUMERIC_KINDS or array.dtype.fields is not None:
        raise _refuse(f"array {name!r} has dtype {array.dtype}; only bool, integer and float arrays")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise _refuse(f"array {name!r} has {int((~np.isfinite(array)).sum())} non-finite values (NaN or inf)")


def load_params(folder: str | Path) -> tuple[bytes, str, dict[str, np.ndarray]]:
    """``(bytes, sha256, arrays)`` of ``folder``'s ``params.npz``; ``(b"", "", {})`` when it ships none."""
    raw = params_bytes(folder)
    if not raw:
        return b"", "", {}
    return raw, hashlib.sha256(raw).hexdigest(), parse_params(raw)


def frame_arrays(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays as the sandbox's setup frame carries them (``param:NAME``; the child strips the prefix)."""
    return {f"param:{name}": a for name, a in params.items()}
