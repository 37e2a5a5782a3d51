"""The baselines' rows kept on disk and reused while nothing that produced them has changed.

A board's baselines on one split give the same rows for the same items, model and code: ``arena dev`` compares
every method with them, a round records them once per ledger, and notebook 07 runs them again in a second arena
(its post's methods, with a ledger of their own). Kept here, each is computed once per profile.

The key says what the rows depend on: the board's rules, the split's generator seed (for test items, derived from
the round's secret: the seed itself is not written anywhere), the contenders in order, the model (its name, dtype,
device and the bytes of its files) and the code (every file of ``cachecraft_lib``, the board files included, and
the versions of torch, transformers and kvpress). An edit anywhere in the library therefore recomputes rather than
reusing rows an older version wrote. Dev rows go to ``<folder>/dev/<board>/``, test rows to
``<folder>/private/rows/<board>/`` (beside the organiser's other private files).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import pandas as pd

LIBRARY = Path(__file__).resolve().parents[1]  # cachecraft_lib/
VERSIONED = ("torch", "transformers", "kvpress", "numpy", "pandas")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of every library file (path and bytes: the code, the board and profile files, the RULER generator's
    data) and of the versions of the packages the rows pass through: computed once per process (milliseconds)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in LIBRARY.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(LIBRARY)).encode() + b"\0" + path.read_bytes() + b"\0")
    for name in VERSIONED:
        try:
            digest.update(f"{name}={metadata.version(name)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=absent\0".encode())
    return digest.hexdigest()


@lru_cache(maxsize=8)
def model_fingerprint(name: str, device: str | None, dtype: str | None) -> str:
    """The model as loaded: its name, device and dtype and, for a local folder (the embedded and converted
    models), each file's name, size and bytes (the first and last MiB of a file over 64 MiB), so retraining the
    tiny model under the same name changes it. A hub id is taken as it is (its files are not here to read)."""
    from ..models.loading import resolve

    digest = hashlib.sha256(f"{name}\0{device}\0{dtype}\0".encode())
    folder = Path(resolve(name))
    if folder.is_dir():
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            size = path.stat().st_size
            digest.update(f"{path.relative_to(folder)}:{size}:".encode())
            with path.open("rb") as f:
                if size <= 64 << 20:
                    digest.update(f.read())
                else:
                    digest.update(f.read(1 << 20))
                    f.seek(-(1 << 20), 2)
                    digest.update(f.read())
    return digest.hexdigest()


@dataclass(frozen=True)
class RowKey:
    """What a set of rows depends on; ``digest`` names their file."""

    board: str
    split: str  # "dev" | "test"
    rules: tuple  # the board's rules and the split's seed, JSON-able
    contenders: tuple[str, ...]
    model: str  # model_fingerprint
    code: str  # code_fingerprint

    @property
    def digest(self) -> str:
        parts = [self.board, self.split, list(self.rules), list(self.contenders), self.model, self.code]
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class RowCache:
    """Rows kept under ``folder`` (an arena folder, or a profile's shared one)."""

    folder: Path

    def path(self, key: RowKey) -> Path:
        where = self.folder / "dev" / key.board if key.split == "dev" else self.folder / "private" / "rows" / key.board
        return where / f"baselines-{key.digest[:16]}.parquet"

    def load(self, key: RowKey) -> pd.DataFrame | None:
        """The kept rows, or None (none kept, or a file that no longer reads: it is recomputed and replaced)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError):
            return None

    def save(self, key: RowKey, rows: pd.DataFrame) -> None:
        """Written to a temporary name and moved, so a reader never sees half a file."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        rows.to_parquet(tmp)
        tmp.replace(path)
