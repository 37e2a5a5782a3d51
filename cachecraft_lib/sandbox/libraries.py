"""The shared libraries the sandbox's interpreter and numpy load, found as the dynamic loader would find them.

Why: binding the system's library folders whole (``/usr/lib``: 3.5 GB here) gave every sandbox gigabytes of
files the host's page cache holds for all of them; a method that touched a page of a file nothing else reads
left a mark the next sandbox could time (or count in ``getrusage``'s major faults): a context counter across
fresh sandboxes. Only the libraries named (``DT_NEEDED``, recursively) by the interpreter, the standard library's
extension modules and numpy's are bound now, each file at its own path, so the set is small enough for the
harness to keep resident (``resident.py``).

Each library is found on the host in the loader's order (``DT_RPATH`` when there is no ``DT_RUNPATH``, the
harness's ``LD_LIBRARY_PATH``, ``DT_RUNPATH``, ``/etc/ld.so.conf``'s folders, the default folders). One in a
default folder is bound at that folder's path (the sandbox's loader has no cache, only those folders); one found
through ``$ORIGIN`` inside a folder already bound (``numpy.libs``) needs nothing; any other (the interpreter's
``libpython`` in its prefix, through an absolute ``RUNPATH`` or the harness's ``LD_LIBRARY_PATH``) is bound
under ``/sandbox/lib``, which the sandbox's ``LD_LIBRARY_PATH`` names: the host's paths and variables stay out.
Only 64-bit little-endian ELF files are read (x86-64, aarch64); anything else is ``OSError``.
"""

from __future__ import annotations

import glob
import mmap
import os
import struct
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 1, 5, 15, 29
PRIVATE = "lib"  # under /sandbox: the libraries found outside the default folders
ALSO = ("libgcc_s.so.1",)  # loaded by glibc itself (dlopen) to unwind a thread that exits or is cancelled


@dataclass(frozen=True)
class Elf:
    """What the loader reads from one ELF file: its interpreter, needed libraries and search paths."""

    interp: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


def read_elf(path: Path) -> Elf:
    """The dynamic section of a 64-bit little-endian ELF file (``OSError`` for anything else)."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # only the pages read are read
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise OSError(f"{path}: not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        ptype, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if ptype == PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif ptype == PT_DYNAMIC:
            dynamic = (offset, filesz)
        elif ptype == PT_INTERP:
            interp = data[offset:offset + filesz].split(b"\0")[0].decode()
    if dynamic is None:
        return Elf(interp, (), (), ())
    entries = [struct.unpack_from("<qQ", data, dynamic[0] + at) for at in range(0, dynamic[1], 16)]
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    base = next((off + strtab - va for va, off, size in loads if va <= (strtab or -1) < va + size), None)
    if base is None:
        raise OSError(f"{path}: its string table is not in a loaded segment")

    def text(at: int) -> str:
        return data[base + at:data.find(b"\0", base + at)].decode()

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for t, v in entries if t == tag for p in text(v).split(":") if p)

    return Elf(interp, tuple(text(v) for t, v in entries if t == DT_NEEDED), paths(DT_RPATH), paths(DT_RUNPATH))


def default_dirs() -> tuple[str, ...]:
    """The folders the loader searches without a cache (multiarch first, as Debian's glibc does)."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    multi = (f"/lib/{arch}", f"/usr/lib/{arch}") if arch else ()
    return (*multi, "/lib64", "/usr/lib64", "/lib", "/usr/lib")


def conf_dirs(conf: str = "/etc/ld.so.conf") -> list[str]:
    """The folders ``/etc/ld.so.conf`` names (its ``include`` globs followed), for the host's lookup only."""
    found: list[str] = []
    try:
        lines = Path(conf).read_text().splitlines()
    except OSError:
        return found
    for line in (raw.split("#", 1)[0].strip() for raw in lines):
        if line.startswith("include "):
            for name in sorted(glob.glob(line.split(None, 1)[1])):
                found += conf_dirs(name)
        elif line.startswith("/"):
            found.append(line)
    return found


@dataclass
class Libraries:
    """Where each library goes: ``system`` (host file, the same path inside), ``private`` (host file, name under
    ``/sandbox/lib``); ``missing``: names found nowhere (the sandbox's loader will say so, fail closed)."""

    system: dict[str, Path] = field(default_factory=dict)
    private: dict[str, Path] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)


def resolve(objects: list[Path], bound: list[Path]) -> Libraries:
    """The libraries ``objects`` (ELF files the sandbox loads) need, recursively; ``bound``: folders the sandbox
    already sees (a library inside one needs no bind of its own)."""
    defaults = list(dict.fromkeys(os.path.realpath(d) for d in default_dirs() if os.path.isdir(d)))
    host_path = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    tail = [*conf_dirs(), *defaults]
    roots = [os.path.realpath(b) for b in bound]
    found, todo, seen = Libraries(), list(objects), set()
    for name in ALSO:
        hit = _find(name, [], host_path, [], tail)
        if hit:
            todo.append(Path(hit))
    while todo:
        path = todo.pop()
        if os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        try:
            elf = read_elf(Path(os.path.realpath(path)))
        except (OSError, ValueError, struct.error):  # unreadable or not ELF: the sandbox's loader will say so
            continue
        if elf.interp:
            where = os.path.join(os.path.realpath(os.path.dirname(elf.interp)), os.path.basename(elf.interp))
            found.system[where] = Path(os.path.realpath(elf.interp))
        origin = os.path.dirname(os.path.realpath(path))
        expand = [p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for p in (*elf.rpath, *elf.runpath)]
        rpath, runpath = (expand[:len(elf.rpath)], []) if not elf.runpath else ([], expand[len(elf.rpath):])
        for name in elf.needed:
            hit = _find(name, rpath, host_path, runpath, tail)
            if hit is None:
                found.missing.add(name)
                continue
            real = os.path.realpath(hit)
            if any(real.startswith(root + os.sep) for root in roots):
                pass  # inside a bound folder, reached through $ORIGIN there too
            elif os.path.realpath(os.path.dirname(hit)) in defaults:
                found.system[os.path.join(os.path.realpath(os.path.dirname(hit)), name)] = Path(real)
            else:
                found.private[name] = Path(real)
            todo.append(Path(real))
    return found


def _find(name: str, rpath: list[str], host_path: list[str], runpath: list[str], tail: list[str]) -> str | None:
    """The host's file for ``name``, in the loader's order (``tail``: ld.so.conf's and the default folders;
    ``name`` with a slash is a path)."""
    if "/" in name:
        return name if os.path.isfile(name) else None
    for folder in (*rpath, *host_path, *runpath, *tail):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None
