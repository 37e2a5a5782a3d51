"""The one check before the arena reads a file out of a submission folder (the judges' bundle, the site).

A submission folder is written by its author, so a file in it is read only when it is a regular file, reached
through no symbolic link below the folder (a link, even one that points back inside, is refused: it could be
re-pointed), lies inside the folder once resolved, is at most ``MAX_TEXT_BYTES`` long, and lies outside the
arena's ``private/`` folder (the one given, and any ``private/`` beside an arena ledger: per-item test values,
the organiser's key and logs). ``problem`` says what is wrong (None: nothing; a missing file is the caller's
to report), ``read_bytes``/``read_text`` read a file that passes, opened without following a link.

Before a submission is hashed or run (``folder.load_submission``), ``folder_problem`` looks at the whole folder:
the folder itself and everything below it is a plain folder or a regular file with one name (no symbolic link
anywhere, even one pointing inside; no hard link, which is another author's file under this folder's name; no pipe,
socket or device), in at most ``MAX_ENTRIES`` entries ``MAX_DEPTH`` folders deep (a folder that is a git checkout
fits). ``read_member`` then reads one of its top-level files by a descriptor opened relative to the folder's own
descriptor, neither following a link (``O_NOFOLLOW``) nor blocking on a pipe, so a file swapped for a link after
the scan is still refused: the code that runs is the submitter's own regular file. ``decode_text`` turns a text
file's bytes into text or says why it is not text (not UTF-8, binary).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .errors import SubmissionError

MAX_TEXT_BYTES = 1024 * 1024  # a DESCRIPTION.md or metadata.yaml far beyond any real one is refused, not read
MAX_ENTRIES, MAX_DEPTH = 2000, 8  # a handful of files (a .git folder fits): a huge or deep tree is refused unread
BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # control bytes besides tab, newlines, form feed: not text


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
    if info.st_nlink > 1:
        return f"{path.name} has {info.st_nlink} hard links (a submission's files are its own copies)"
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


def _entry_problem(rel: str, info: os.stat_result) -> str | None:
    """Why one entry below a submission folder is refused (``rel``: its path inside the folder)."""
    if stat.S_ISLNK(info.st_mode):
        return f"{rel} is a symbolic link"
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"{rel} is not a regular file (a pipe, socket or device)"
    if info.st_nlink > 1:
        return f"{rel} has {info.st_nlink} hard links (another name for a file outside this folder)"
    return None


def folder_problem(folder: str | Path) -> str | None:
    """Why the submission ``folder`` as a whole is refused (see the module doc); None when it is plain."""
    folder = Path(folder)
    try:
        mode = os.lstat(folder).st_mode
    except OSError:
        return None  # absent: the caller reports a missing folder
    if stat.S_ISLNK(mode):
        return f"the folder {folder.name} is itself a symbolic link; pass the folder it points to"
    if not stat.S_ISDIR(mode):
        return None  # a file: the caller reports that it is not a folder
    try:
        return _scan(folder)
    except OSError:
        return f"the folder {folder.name} (or a folder in it) cannot be listed"


def _scan(folder: Path) -> str | None:
    """``folder_problem``'s walk below a plain folder (links never followed)."""
    seen, todo = 0, [(folder, "", 0)]
    while todo:
        path, prefix, depth = todo.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return f"the folder holds more than {MAX_ENTRIES} entries"
                rel = prefix + entry.name
                why = _entry_problem(rel, entry.stat(follow_symlinks=False))
                if why is not None:
                    return why
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 >= MAX_DEPTH:
                        return f"{rel} lies more than {MAX_DEPTH} folders deep"
                    todo.append((Path(entry.path), rel + "/", depth + 1))
    return None


def read_member(folder: str | Path, name: str, cap: int, kind: str) -> bytes | None:
    """The bytes of the top-level file ``name`` of ``folder`` (None when absent), read by descriptor without
    following a link or blocking on a pipe; ``SubmissionError(kind)`` when it is not a plain file with one name
    or is over ``cap`` bytes."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise SubmissionError("bad_folder", f"{Path(folder).name} cannot be opened as a plain folder") from None
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: a link; anything else: not a file we may read
        raise SubmissionError("bad_folder", f"{name} is a symbolic link or cannot be read; a submission's files "
                                            "are plain files inside its folder") from None
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    why = _entry_problem(name, info) or (f"{name} is a folder" if stat.S_ISDIR(info.st_mode) else None)
    if why is not None or info.st_size > cap:
        os.close(fd)
        if why is not None:
            raise SubmissionError("bad_folder", f"{why}; a submission's files are plain files inside its folder")
        raise SubmissionError(kind, f"{name} is {info.st_size} bytes; the limit is {cap}")
    with os.fdopen(fd, "rb") as f:
        raw = f.read(cap + 1)
    if len(raw) > cap:
        raise SubmissionError(kind, f"{name} is over {cap} bytes; the limit is {cap}")
    return raw


def decode_text(raw: bytes, name: str, kind: str) -> str:
    """``raw`` as UTF-8 text; ``SubmissionError(kind)`` saying where it is not text (never quoting it)."""
    found = BINARY.search(raw)
    if found is not None:
        bad = found.start()
        raise SubmissionError(kind, f"{name} is not a text file (a control byte 0x{raw[bad]:02x} at byte {bad}); "
                                    "write it as plain UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SubmissionError(kind, f"{name} is not UTF-8 text (a bad byte at byte {err.start}); save it as "
                                    "UTF-8") from None
