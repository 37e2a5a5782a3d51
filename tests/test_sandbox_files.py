"""The files a sandbox can read (issue 57: "the files a method can read made private to the sandbox"): only the
libraries its interpreter and numpy load, each page of them in the host's page cache before any sandbox starts
(so no sandbox can leave a mark in the cache for the next), and the interpreter's own libpython, found through
its RUNPATH or the harness's LD_LIBRARY_PATH, bound under a neutral path with no host variable inside."""

from __future__ import annotations

import ast
import os
import shutil
import sys
from pathlib import Path

import pytest
from sandbox_helpers import SCALARS, layer_arrays, method_box

from cachecraft_lib.arena.submissions.folder import SubmissionError
from cachecraft_lib.sandbox import boundary, bwrap, libraries, resident


def reported(sandbox, marker: str) -> dict:
    with pytest.raises(SubmissionError) as err, sandbox:
        sandbox.call(layer_arrays(), **SCALARS)
    assert marker in str(err.value), str(err.value)
    return ast.literal_eval(str(err.value).split(marker + " ", 1)[1].split(" (")[0].rstrip())


def _unread_system_file() -> Path:
    """A file of the system's library folder that the sandbox's interpreter and numpy never load."""
    kept = set(boundary._resident().files)
    folder = next(Path(os.path.realpath(d)) for d in libraries.default_dirs() if os.path.isdir(d))
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.is_symlink() and path.stat().st_size >= 8192 and path.resolve() not in kept:
            return path
    pytest.skip(f"no file in {folder} to try")


def _evict(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (those no process maps: the harness keeps no page mapped)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's mincore sees whether the pages left the cache")
def test_no_page_a_sandbox_can_read_is_cold_so_none_counts_sandboxes(tmp_path):
    """A file of the system's library folders nothing loads (readable when the folders were bound whole), a numpy
    file and a standard-library module nothing imports, each dropped from the page cache: the method finds the first
    absent and the others warm (the harness brought them back before the start), never cold."""
    numpy_dir, stdlib = boundary._numpy_dirs()[0], boundary._stdlib()
    numpy_file = max((p for p in (numpy_dir / "_core" / "tests").glob("test_*.py")), key=lambda p: p.stat().st_size)
    stdlib_file = stdlib / "pydoc_data" / "topics.py"
    system_file = _unread_system_file()
    prefix = Path(os.path.realpath(sys.base_prefix))
    inside = {"system": str(system_file), "numpy": f"/sandbox/site/numpy/{numpy_file.relative_to(numpy_dir)}",
              "stdlib": f"/sandbox/python/{stdlib_file.relative_to(prefix)}"}
    kept = boundary._resident()
    for path in (system_file, numpy_file, stdlib_file):
        _evict(path)
    lacking = set(kept.missing().tolist())
    first = {p: (kept.spans[p.resolve()][0] - kept.address) // resident.PAGE for p in (numpy_file, stdlib_file)}
    if not all(page in lacking for page in first.values()):  # another process maps them (another harness)
        pytest.skip("the page cache kept the pages here (nothing to see)")
    seen = reported(method_box(tmp_path, "arena_page_cache", paths=inside), "PAGES")
    assert seen == {"system": "absent", "numpy": "warm", "stdlib": "warm"}, seen


def test_resident_brings_back_what_left_the_cache(tmp_path):
    """``Resident.ensure`` brings back every page of its files that left the cache (root sees it with mincore), and
    the harness keeps none of them in its page tables (its resident size, which the search reports, stays its own)."""
    files = []
    for i in range(3):
        path = tmp_path / f"f{i}"
        with open(path, "wb") as f:
            f.write(os.urandom(5 * resident.PAGE + 7))
            os.fsync(f.fileno())  # a dirty page cannot be paged out
        files.append(path)
    kept = resident.Resident(resident.files_under([tmp_path], {tmp_path / "f2"}))
    assert kept.pages == 12 and set(kept.spans) == {files[0].resolve(), files[1].resolve()}
    for path in files[:2]:
        _evict(path)
    lacking = kept.missing()  # None: only root's mincore sees the page cache
    if lacking is not None and lacking.size == 0:
        pytest.skip("nothing left the page cache here (a tmpfs?)")
    assert kept.ensure() == (12 if lacking is None else lacking.size)
    if lacking is not None:
        assert kept.missing().size == 0
    assert _resident_kb(kept.address, kept.pages * resident.PAGE) == 0


def _resident_kb(address: int, size: int) -> int:
    """This process's resident kB in the mappings within [address, address + size) (``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and ":" not in head:
            start = int(head.split("-")[0], 16)
            inside = address <= start < address + size
        elif inside and head == "Rss:":
            total += int(line.split()[1])
    return total


def test_the_interpreters_own_libpython_is_loaded_and_no_host_variable_is_inside(tmp_path):
    """This machine's interpreter finds its libpython through an absolute RUNPATH into its prefix (which the sandbox
    sees at /sandbox/python): the sandbox loaded the system's libpython (another patch release) before; now the
    prefix's is bound under /sandbox/lib, named by the sandbox's only added variable."""
    seen = reported(method_box(tmp_path, "arena_environment"), "ENVIRONMENT")
    assert seen["version"] == sys.version.replace("(", "<")
    allowed = {**bwrap.CHILD_ENV, "LD_LIBRARY_PATH": f"/sandbox/{libraries.PRIVATE}", "PWD": "/"}
    assert {k: allowed.get(k) for k in seen["environ"]} == seen["environ"], seen["environ"]


def test_a_libpython_found_through_the_harnesss_library_path_is_bound_privately(tmp_path, monkeypatch):
    """A Python built without a RUNPATH, run with LD_LIBRARY_PATH naming its lib folder: the library is found there
    (before the RUNPATH, as the loader does) and bound under /sandbox/lib; no host folder goes inside."""
    exe = Path(bwrap.interpreter()[1])
    needed = [n for n in libraries.read_elf(exe).needed if n.startswith("libpython")]
    if not needed:
        pytest.skip("this interpreter links libpython statically")
    as_is = libraries.resolve([exe], [])
    source = as_is.private.get(needed[0]) or next(v for k, v in as_is.system.items() if k.endswith("/" + needed[0]))
    shutil.copy2(source, tmp_path / needed[0])
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    found = libraries.resolve([exe], [])
    assert found.private == {needed[0]: (tmp_path / needed[0]).resolve()} and not found.missing
    assert all(not inside.startswith(str(tmp_path)) for inside in found.system)
