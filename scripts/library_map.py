"""The map of the library: one line per package and module, its comment the first sentence of the module's
docstring, so the map says what the code says and lists every file (tests/test_library_map.py). The README
shows the packages; docs/library_files.md shows every file.

    python scripts/library_map.py            # print the full map
    python scripts/library_map.py --write    # rewrite both maps (the README's packages; docs/library_files.md)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "cachecraft_lib"
README = REPO / "README.md"
FILES_DOC = REPO / "docs" / "library_files.md"
WIDTH = 118  # the README's code block stays readable without scrolling
SKIP_DIRS = {"__pycache__"}
OPEN, CLOSE = "<!-- library-map:start -->", "<!-- library-map:end -->"
FILES_OPEN, FILES_CLOSE = "<!-- library-files:start -->", "<!-- library-files:end -->"


def first_sentence(path: Path) -> str:
    """The docstring's opening sentence, on one line ('' when the module has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".").replace("``", "`")


def _comment(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    cut = text[: room - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:(") + "…"


def _line(depth: int, name: str, text: str) -> str:
    label = "  " * depth + name
    pad = max(24, len(label) + 2)
    return f"{label:<{pad}}# {_comment(text, WIDTH - pad - 2)}" if text else label


def _entries(folder: Path, depth: int, files: bool = True) -> list[str]:
    lines = []
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    for path in modules if files or depth == 1 else ():
        lines.append(_line(depth, path.name, first_sentence(path)))
    for package in packages:
        lines.append(_line(depth, package.name + "/", first_sentence(package / "__init__.py")))
        if package.name not in SKIP_DIRS and (files or depth == 1):
            lines += _entries(package, depth + 1, files)
    data = sorted(p for p in folder.iterdir() if p.is_dir() and not (p / "__init__.py").exists()
                  and p.name != "__pycache__")
    for extra in data:
        lines.append(_line(depth, extra.name + "/", _data_comment(extra)))
    return lines


def _data_comment(folder: Path) -> str:
    readme = folder / "README.md"
    if readme.exists():
        return readme.read_text().splitlines()[0].lstrip("# ").strip()
    names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    return "folders: " + ", ".join(names) if names else ""


def library_map(files: bool = True) -> str:
    """Every package and module (``files``), or the top-level modules and the packages two levels deep."""
    return "\n".join(["cachecraft_lib/", *_entries(LIB, 1, files)])


def readme_block(text: str, markers: tuple[str, str] = (OPEN, CLOSE)) -> str:
    """A map as it stands in the README (between its two markers, inside the code fence)."""
    start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
    return text[start:end].strip().removeprefix("```").removesuffix("```").strip()


def _replace(text: str, markers: tuple[str, str], body: str) -> str:
    start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
    return text[:start] + "\n```\n" + body + "\n```\n" + text[end:]


def write(readme: Path = README, files_doc: Path = FILES_DOC) -> None:
    readme.write_text(_replace(readme.read_text(), (OPEN, CLOSE), library_map(files=False)))
    files_doc.write_text(_replace(files_doc.read_text(), (FILES_OPEN, FILES_CLOSE), library_map()))


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
    else:
        print(library_map())
