"""A reporter of what untrusted code tried, not the boundary (the operating system is: ``sandbox.boundary``).

An audit hook sees the events the interpreter raises (files, sockets, processes, imports beyond the
layer's ``ALLOWED``), refuses them and records the first, so that a method that catches the refusal is
still reported with its kind (``file_access`` or ``network``). Python's documentation is plain that code in
the same interpreter can get around audit hooks; when it does, the seccomp filter, the namespaces and the
read-only filesystem still hold, and only the kind in the report is less precise.
"""

from __future__ import annotations

import sys

NETWORK = ("socket", "ssl", "http", "urllib", "requests", "select", "selectors", "asyncio")
VIOLATIONS: list[tuple[str, str]] = []
_ALLOWED: set[str] = set()


def kind_of(event: str, args: tuple) -> str | None:
    """The violation an audit event is, or None when allowed."""
    if event == "import":
        top = str(args[0]).split(".")[0]
        if top in _ALLOWED:
            return None
        return "network" if top in NETWORK else "file_access"
    if event.startswith(("socket.", "ssl.")) or event == "urllib.Request":
        return "network"
    if event == "open" or event.startswith(("os.", "shutil.", "glob.", "tempfile.", "pathlib.", "mmap.")):
        return "file_access"
    if event.startswith(("subprocess.", "ctypes.", "resource.", "sys.addaudithook", "builtins.input",
                         "_posixsubprocess", "pty.", "signal.")):
        return "file_access"
    return None


def _hook(event: str, args: tuple) -> None:
    kind = kind_of(event, args)
    if kind is not None:
        VIOLATIONS.append((kind, f"{event}{args[:2]!r}"[:300]))
        what = "network" if kind == "network" else "file and process"
        raise PermissionError(f"{what} access is not allowed in sandboxed code ({event})")


def install(allowed: tuple[str, ...]) -> None:
    _ALLOWED.update(allowed)
    sys.addaudithook(_hook)


def refusal() -> tuple[str, str] | None:
    """(kind, text) of the first thing refused, if any."""
    return (VIOLATIONS[0][0], f"refused: {VIOLATIONS[0][1]}") if VIOLATIONS else None
