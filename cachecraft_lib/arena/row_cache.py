"""The baselines' rows kept and reused while nothing that produced them has changed.

A board's baselines on one split give the same rows for the same items, model and code: ``arena dev`` compares
every method with them, a round records them once per ledger, and notebook 07 runs them again in a second arena
(its post's methods, with a ledger of their own). Kept here, each is computed once.

The key says what the rows depend on: the whole board (its rules as loaded, so a board changed in memory or
another profile's board is another key), the items themselves (a digest of every column: where they came from,
generated or a hub dataset, is in them), the contenders in order, the model (its name, dtype, device and the bytes
of a local model's files; a hub id by name) and the code (every file of ``cachecraft_lib`` and the versions of
torch, transformers and kvpress). An edit anywhere in the library therefore recomputes rather than reusing rows
an older version wrote.

Dev rows (public items) are kept on disk under ``<folder>/dev/<board>/``. Test rows are kept **in this process's
memory only**: they hold the hidden items' answers (the full cache's are nearly the references), which the arena
never writes to disk outside the ledger's per-unit scores, and a file named after the split's seed would let
anyone who lists the folder try every seed; in memory, notebook 07's second arena still reads the first's.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import pandas as pd

LIBRARY = Path(__file__).resolve().parents[1]  # cachecraft_lib/
VERSIONED = ("torch", "transformers", "kvpress", "numpy", "pandas")


def shared_rows_folder(profile: str) -> Path:
    """The profile's default arena folder, where ``Arena(profile)`` keeps its baselines' dev rows: an arena in a
    scratch folder passes it as ``rows_root`` to read rows another run kept. Safe to share between notebooks
    because a row is reused only under the key above, which names everything that made it."""
    from ..paths import results_dir

    return results_dir("arena", profile)


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


def items_digest(items: pd.DataFrame) -> str:
    """A digest of every column of every item (as text: answers are lists)."""
    text = json.dumps([list(map(str, items.columns)), items.astype(str).values.tolist()], default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class RowKey:
    """What a set of rows depends on; ``digest`` names it."""

    board: str
    split: str  # "dev" | "test"
    rules: str  # the whole board as loaded, as JSON
    items: str  # items_digest
    contenders: tuple[str, ...]
    model: str  # model_fingerprint
    code: str  # code_fingerprint

    @property
    def digest(self) -> str:
        parts = [self.board, self.split, self.rules, self.items, list(self.contenders), self.model, self.code]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


_IN_MEMORY: OrderedDict[str, pd.DataFrame] = OrderedDict()  # test rows of this process, by digest
IN_MEMORY_LIMIT = 16  # boards' test rows kept at once (a few MB each at most)


@dataclass(frozen=True)
class RowCache:
    """Dev rows kept under ``folder`` (an arena folder, or a profile's shared one); test rows in memory."""

    folder: Path

    def path(self, key: RowKey) -> Path:
        if key.split != "dev":
            raise ValueError("only dev rows are kept on disk")
        return self.folder / "dev" / key.board / f"baselines-{key.digest[:16]}.parquet"

    def load(self, key: RowKey) -> pd.DataFrame | None:
        """The kept rows (a copy), or None (none kept, or a file that no longer reads: recomputed and replaced)."""
        if key.split != "dev":
            rows = _IN_MEMORY.get(key.digest)
            if rows is not None:
                _IN_MEMORY.move_to_end(key.digest)
            return None if rows is None else rows.copy()
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError):
            return None

    def save(self, key: RowKey, rows: pd.DataFrame) -> None:
        """Kept for the next caller. On disk: written to a temporary file and moved, so a reader never sees half a
        file; a folder that cannot be written loses the reuse, never the run."""
        if key.split != "dev":
            _IN_MEMORY[key.digest] = rows.copy()
            while len(_IN_MEMORY) > IN_MEMORY_LIMIT:
                _IN_MEMORY.popitem(last=False)
            return
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            os.close(fd)
            rows.to_parquet(tmp)
            os.replace(tmp, path)
        except OSError as err:
            warnings.warn(f"the baselines' dev rows could not be kept at {path} ({err}); they are recomputed next "
                          "time", stacklevel=2)
