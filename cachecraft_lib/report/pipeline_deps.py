"""What a notebook's outputs depend on, computed from the source: the library modules it imports (transitively,
read with ``ast``, never imported) and the files those modules read.

The pipeline (``report.pipeline``) writes these lists into ``dvc.yaml``, so a notebook is stale exactly when a
module it can reach changes. The closure is conservative: an import inside a function counts (a notebook that
calls the function runs it), one under ``if TYPE_CHECKING:`` does not (it never runs). Files a module reads
are found by three rules, each visible in the code: a package's own non-Python files (board YAML, the site's
CSS), a package's folders that are not packages (the arena's example submissions, the search's seed
programs), the sibling files of a module that locates things from ``__file__`` (programs read as text), and a
committed ``data/`` file or folder whose name a module spells (``paper_numbers.csv``, the embedded model's
``tiny-ruler-llama``).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from pathlib import Path

from ..paths import REPO

PACKAGE = "cachecraft_lib"
SKIPPED_NAMES = {"__pycache__", "README.md"}  # not read by any code: editing them stales nothing


def notebook_source(notebook: Path) -> str:
    """The code cells of a notebook as one Python text (IPython magics and shell lines left out)."""
    cells = json.loads(notebook.read_text())["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines) + "\n"


def module_path(name: str, root: Path = REPO) -> Path | None:
    """The file of a library module or package (``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``), None if neither."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imported_modules(source: str, module: str = "", is_package: bool = False, root: Path = REPO) -> set[str]:
    """The library modules a source imports directly (``module`` names it, for relative imports)."""
    found: set[str] = set()
    here = module if is_package else module.rpartition(".")[0]
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        else:
            if node.level:
                parts = here.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases, names = [base], [alias.name for alias in node.names]
        for base in bases:
            if base.split(".")[0] != PACKAGE:
                continue
            subs = [f"{base}.{n}" for n in names if module_path(f"{base}.{n}", root)]
            found.update(subs)
            if len(subs) < len(names) or not names:  # `from a import f` (f not a module) or `import a.b`
                found.add(base)
    return {m for m in found if module_path(m, root)}


def _with_parents(name: str) -> set[str]:
    """A module and the packages above it: importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def module_closure(start: Iterable[str], root: Path = REPO) -> set[str]:
    """Every library module reachable from ``start`` through imports (packages' ``__init__`` included)."""
    seen: set[str] = set()
    todo = [m for s in start for m in _with_parents(s)]
    while todo:
        name = todo.pop()
        if name in seen or module_path(name, root) is None:
            continue
        seen.add(name)
        path = module_path(name, root)
        for found in imported_modules(path.read_text(), name, path.name == "__init__.py", root):
            todo.extend(_with_parents(found) - seen)
    return seen


def notebook_modules(notebook: Path, root: Path = REPO) -> set[str]:
    """The library modules a notebook can reach: what its cells import, and what those import."""
    return module_closure(imported_modules(notebook_source(notebook), root=root), root)


def tracked_files(root: Path) -> set[str]:
    """Committed files (relative paths): data a pipeline may depend on must exist in a fresh clone."""
    import subprocess

    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True)
    return {p for p in out.stdout.split("\0") if p}


def data_files(modules: Iterable[str], root: Path = REPO, tracked: set[str] | None = None) -> set[str]:
    """Files (or folders) the given modules read, by the rules in the module docstring; repo-relative."""
    tracked = tracked_files(root) if tracked is None else tracked
    out: set[str] = set()
    modules = set(modules)
    for name in modules:
        path = module_path(name, root)
        rel = path.relative_to(root).as_posix()
        source = path.read_text()
        if path.name == "__init__.py":  # a package: its data files and its folders that are not packages
            folder = path.parent
            for child in folder.iterdir():
                child_rel = child.relative_to(root).as_posix()
                if child.name in SKIPPED_NAMES:
                    continue
                if child.is_file() and child.suffix != ".py" and child_rel in tracked:
                    out.add(child_rel)
                elif child.is_dir() and not (child / "__init__.py").exists() and \
                        any(t.startswith(child_rel + "/") for t in tracked):
                    out.add(child_rel)
        if "__file__" in source:  # locates siblings by its own path: they are its data (programs read as text)
            for sibling in path.parent.glob("*.py"):
                sib_rel = sibling.relative_to(root).as_posix()
                if sib_rel in tracked and sib_rel != rel:
                    out.add(sib_rel)
        for data in (t for t in tracked if t.startswith("data/") and Path(t).name not in SKIPPED_NAMES):
            parts = data.split("/")  # a file by its name, or a folder of data/ by its name (a model's folder)
            if any(f'"{part}"' in source for part in parts[1:]):
                out.add(data)
    return out - {module_path(m, root).relative_to(root).as_posix() for m in modules}


def module_files(modules: Iterable[str], root: Path = REPO) -> set[str]:
    """The repo-relative files of modules."""
    return {module_path(m, root).relative_to(root).as_posix() for m in modules}
