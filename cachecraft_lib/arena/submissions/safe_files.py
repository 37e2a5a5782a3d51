"""The one check before the arena reads a file out of a submission folder (the judges' bundle, the site).

A submission folder is written by its author, so a file in it is read only when it is a regular file, reached
through no symbolic link below the folder (a link, even one that points back inside, is refused: it could be
re-pointed), lies inside the folder once resolved, is at most ``MAX_TEXT_BYTES`` long, and lies outside the
arena's ``private/`` folder (the one given, and any ``private/`` beside an arena ledger: per-item test values,
the organiser's key and logs). ``problem`` says what is wrong (None: nothing; a missing file is the caller's
to report), ``read_bytes``/``read_text`` read a file that passes, opened without following a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_BYTES = 1024 * 1024  # a DESCRIPTION.md or metadata.yaml far beyond any real one is refused, not read


def inside(path: Path, folder: Path) -> bool:
    """``path`` resolves inside ``folder`` (links followed)."""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def in_some_arena_private(path: Path) -> bool:
    """``path`` lies under a ``private`` folder beside an arena ledger (any arena's, not only the one given)."""
    return any(p.name == "private" and ((p.parent / "ledger.jsonl").exists() or (p.parent / "ledger.pub").exists())
               for p in Path(path).resolve().parents)


def _link_below(path: Path, folder: Path) -> Path | None:
    """The first symbolic link on ``path``'s components below ``folder`` (``path`` itself included), or None."""
    try:
        parts = Path(path).relative_to(folder).parts
    except ValueError:
        return None  # not spelled under the folder: ``inside`` refuses it
    step = Path(folder)
    for part in parts:
        step = step / part
        if step.is_symlink():
            return step
    return None


def problem(path: str | Path, folder: str | Path, private: str | Path | None = None,
            cap: int = MAX_TEXT_BYTES) -> str | None:
    """Why ``path`` (a file of the submission in ``folder``) must not be read; None when it may be (or is absent)."""
    path, folder = Path(path), Path(folder)
    link = _link_below(path, folder)
    if link is not None:
        return f"{link.name} is a symbolic link (a submission's files are plain files inside its folder)"
    if not inside(path, folder):
        return f"{path.name} lies outside its folder"
    if (private is not None and inside(path, Path(private))) or in_some_arena_private(path):
        return f"{path.name} lies in the arena's private folder"
    if not path.exists():
        return None
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        return f"{path.name} is not a regular file"
    if info.st_size > cap:
        return f"{path.name} is {info.st_size} bytes, over the {cap}-byte limit"
    return None


def read_text(path: str | Path, folder: str | Path, private: str | Path | None = None,
              cap: int = MAX_TEXT_BYTES) -> str | None:
    """``path``'s text (UTF-8, bad bytes replaced) when ``read_bytes`` reads it; None otherwise."""
    raw = read_bytes(path, folder, private, cap)
    return None if raw is None else raw.decode("utf-8", errors="replace")


def read_bytes(path: str | Path, folder: str | Path, private: str | Path | None = None,
               cap: int = MAX_TEXT_BYTES) -> bytes | None:
    """``path``'s bytes when it exists and passes ``problem``; None otherwise (opened with ``O_NOFOLLOW``, so a link
    swapped in after the check is not followed; at most ``cap`` bytes are read)."""
    path = Path(path)
    if not path.exists() or problem(path, folder, private, cap) is not None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(cap)
