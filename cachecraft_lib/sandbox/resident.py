"""Every page of every file a sandbox can read, kept in the host's page cache: the cache tells a sandbox nothing.

Why: the files a sandbox reads (the interpreter, its standard library, numpy, the system libraries they load) are
the host's, in one page cache shared with every other sandbox. A page some sandbox touched first is fast, or
costs no major fault (``getrusage``), for the next: a method read a count of the contexts it had been run on, or
a signal from another sandbox, out of which pages were already cached. The filter refuses the calls that ask
the cache or change it (``mincore``, ``cachestat``, ``RWF_NOWAIT``, eviction advice, read-ahead), but a plain
read can still be timed; so nothing may be left for a sandbox to bring in. Before each sandbox starts, the
harness makes every page of the readable set resident (``ensure``); a sandbox cannot evict one (its cgroup
reclaims only pages charged to it, and the harness touched these first; without a cgroup it has no room to
press the host), so what it reads is always cached, whichever sandbox read it before.

How: the files are mapped once per process side by side in one reserved region (``MADV_DONTFORK``: children do
not copy it; about 1 s here for 5,489 files, 204 MB). As root, ``ensure`` asks ``mincore`` which pages the cache
lacks (one call, about 4 ms here) and reads a byte of each; another user's ``mincore`` answers "resident" for a
file it may not write, so there it reads a byte of every page, 16 MB at a time (about 16 ms here, loaded). Either
way the pages' entries in the harness's page tables are dropped after (``MADV_DONTNEED``: the page cache keeps
the pages), so the harness's resident size, which the search reports, does not grow by the set. A file of the set
truncated while mapped would end the harness with SIGBUS: these are the interpreter's and numpy's own files.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PAGE = mmap.PAGESIZE
PROT_NONE, PROT_READ = 0, 1
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 1, 2, 0x10, 0x20, 0x4000
MADV_DONTNEED, MADV_DONTFORK = 4, 10
CHUNK = 16 << 20  # bytes read before their page-table entries are dropped (the harness's resident size's peak)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def files_under(paths: list[Path], hidden: set[Path]) -> list[Path]:
    """The regular, non-empty files under ``paths`` (files or folders), skipping ``hidden`` (covered inside)."""
    found: list[Path] = []
    for top in paths:
        if top in hidden:
            continue
        if top.is_file():
            found.append(top)
            continue
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if Path(root, d) not in hidden]
            found += [Path(root, n) for n in names if Path(root, n) not in hidden]
    return sorted({p.resolve() for p in found if p.is_file() and not p.is_symlink() and p.stat().st_size > 0})


@dataclass
class Resident:
    """The readable set mapped in one region; ``ensure`` makes all of it resident."""

    files: list[Path]
    address: int = 0
    pages: int = 0
    spans: dict[Path, tuple[int, int]] = field(default_factory=dict)  # file -> (address, bytes) in the region

    def __post_init__(self) -> None:
        # one the harness cannot read, the sandbox (its own uid, or a leased one) cannot read either
        sizes = [(path, -(-path.stat().st_size // PAGE)) for path in self.files if os.access(path, os.R_OK)]
        self.pages = sum(n for _, n in sizes)
        if not self.pages:
            return
        libc, total = _libc(), self.pages * PAGE
        region = libc.mmap(None, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if region in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "no address space for the sandbox's readable files")
        at = region
        for path, n in sizes:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                got = libc.mmap(at, n * PAGE, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0)
            finally:
                os.close(fd)
            if got != at:
                raise OSError(ctypes.get_errno(), f"mapping {path}")
            self.spans[path] = (at, n * PAGE)
            at += n * PAGE
        libc.madvise(region, total, MADV_DONTFORK)
        self.address = region
        self._view = np.frombuffer((ctypes.c_ubyte * total).from_address(region), np.uint8)
        self.ensure()

    def missing(self) -> np.ndarray | None:
        """The pages not in the page cache (their indices), or None where ``mincore`` cannot tell (not root)."""
        if not self.pages or os.geteuid() != 0:
            return None
        vector = ctypes.create_string_buffer(self.pages)
        if _libc().mincore(self.address, self.pages * PAGE, vector) != 0:
            return None
        return np.flatnonzero((np.frombuffer(vector.raw, np.uint8) & 1) == 0)

    def ensure(self) -> int:
        """Bring every page of the set into the page cache; the pages read (all of them where ``mincore`` cannot
        tell which are missing)."""
        if not self.pages:
            return 0
        libc, lacking = _libc(), self.missing()
        if lacking is not None:
            if lacking.size:
                int(self._view[lacking * PAGE].sum())
                libc.madvise(self.address, self.pages * PAGE, MADV_DONTNEED)
            return int(lacking.size)
        for start in range(0, self.pages * PAGE, CHUNK):
            size = min(CHUNK, self.pages * PAGE - start)
            int(self._view[start:start + size:PAGE].sum())
            libc.madvise(self.address + start, size, MADV_DONTNEED)
        return self.pages
