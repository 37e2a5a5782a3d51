"""A submission's fitted parameters: one ``params.npz`` beside ``method.py``, checked before anything runs.

Why a file and not literals in ``method.py``: a fitted model (kvprior's ridge weights) is data, and pasting it into
code hides it from review and bloats the code the judges read. The file is untrusted, so it is read here, outside
the sandbox, with every door a ``.npz`` can open closed: at most ``MAX_PARAMS_BYTES`` on disk and
``MAX_PARAMS_UNPACKED`` unpacked (a zip bomb is refused before it is inflated), at most ``MAX_ARRAYS`` arrays named
like identifiers, loaded with ``allow_pickle=False`` (an object array is refused, never unpickled), numeric dtypes
only, every float finite. ``load_params`` returns the bytes (hashed into ``Submission.params_sha256``, for the
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
from .safe_files import problem, read_bytes

PARAMS_FILE = "params.npz"
MAX_PARAMS_BYTES = 16 * 1024 * 1024
MAX_PARAMS_UNPACKED = 64 * 1024 * 1024
MAX_ARRAYS = 256
NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats (no complex, strings, objects, records)
ARRAY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _refuse(message: str):
    return SubmissionError("bad_params", f"{PARAMS_FILE} {message}")


def params_bytes(folder: str | Path) -> bytes:
    """The bytes of ``folder``'s ``params.npz`` (``b""`` when it ships none); refused when unsafe or over the cap."""
    path = Path(folder) / PARAMS_FILE
    if not path.exists() and not path.is_symlink():
        return b""
    why = problem(path, folder, cap=MAX_PARAMS_BYTES)
    if why is not None:
        raise _refuse(f"cannot be read: {why} (the cap is {MAX_PARAMS_BYTES} bytes)")
    raw = read_bytes(path, folder, cap=MAX_PARAMS_BYTES + 1)
    if raw is None or len(raw) > MAX_PARAMS_BYTES:
        raise _refuse(f"cannot be read or is over {MAX_PARAMS_BYTES} bytes")
    return raw


def parse_params(raw: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file's bytes, read-only and contiguous; ``SubmissionError("bad_params")`` for any
    file that is not a small bundle of finite numeric arrays."""
    if len(raw) > MAX_PARAMS_BYTES:
        raise _refuse(f"is {len(raw)} bytes; the cap is {MAX_PARAMS_BYTES}")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise _refuse(f"is not an npz archive ({err}); write it with numpy.savez or savez_compressed") from None
    if len(infos) > MAX_ARRAYS:
        raise _refuse(f"holds {len(infos)} arrays; at most {MAX_ARRAYS}")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > MAX_PARAMS_UNPACKED:
        raise _refuse(f"unpacks to {unpacked} bytes; at most {MAX_PARAMS_UNPACKED}")
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
        raise _refuse(f"cannot be loaded without pickle ({err}); ship numeric arrays only") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise _refuse(f"is damaged ({type(err).__name__}: {err})") from None
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
