"""The library's house rules (issue 36), checked on the source so that a move or a new import cannot break them.

- No import cycle among cachecraft_lib's modules, counting every import (module level and inside functions).
- No upward import. The rule: inside every package, its direct children (modules and sub-packages) import one
  another without a cycle, so each package's children fall into layers and every import between them runs one
  way (e.g. ``arena.scoring`` may use ``arena.boards``, then ``arena.boards`` may not use ``arena.scoring``; at the
  top, ``stats`` is used by ``paper``, never the reverse). Importing a sibling of one's parent package
  (``arena/scoring/score.py`` importing ``arena.boards.boards``) is fine under this rule; what is refused is a
  pair of packages (or modules) that need each other. Besides, only ``cli`` imports ``cli`` (it is the top).
- No module over about 300 lines: the hard line is ``MAX_LINES`` (300 plus a tenth of slack); a module past it
  must be split (or listed in ``LONG`` with why).
- One home per module: nothing is left at the old flat paths the moves of issue 36 emptied.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = "cachecraft_lib"
MAX_LINES = 330
LONG: dict[str, str] = {}  # "cachecraft_lib/x.py": why it may stay longer (none today)
# Programs and submissions run in their own interpreters (the sandbox), not as library modules.
NOT_LIBRARY = ("sandbox/runtime/", "search/seeds/", "methods/programs/", "arena/examples/")
# Known cycles through an import inside a function, with why they stay (empty the set when they are fixed).
KNOWN_CYCLES: set[frozenset[str]] = set()  # none: a cycle found is fixed, not listed


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / PKG).rglob("*.py")):
        rel = path.relative_to(ROOT / PKG).as_posix()
        if "__pycache__" in rel or (rel.startswith(NOT_LIBRARY) and path.name != "__init__.py"):
            continue
        found[_name(path)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The library modules ``name`` imports (a ``from pkg import mod`` counts as importing ``pkg.mod``)."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            src = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            out |= {f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES else src for a in node.names}
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root), on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child), on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    return comps


def test_the_walk_sees_the_library():
    """The checks below mean something only if they see the modules (and their imports)."""
    assert {"cachecraft_lib.methods.policy", "cachecraft_lib.arena.arena", "cachecraft_lib.stats.intervals"} <= set(MODULES)
    assert "cachecraft_lib.stats.intervals" in GRAPH["cachecraft_lib.paper.analysis"]


def test_no_import_cycle_among_modules():
    cycles = [c for c in _cycles(GRAPH) if frozenset(c) not in KNOWN_CYCLES]
    assert not cycles, f"modules that import each other (directly or through others): {cycles}"


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


@pytest.mark.parametrize("package", sorted({m.rsplit(".", 1)[0] for m in MODULES if "." in m}))
def test_no_upward_import_inside(package: str):
    """The children of ``package`` import one another in one direction only (module doc)."""
    prefix = package + "."

    def child(module: str) -> str:
        return prefix + module[len(prefix):].split(".")[0]

    lifted: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        if module.startswith(prefix):
            lifted.setdefault(child(module), set()).update(
                child(d) for d in deps if d.startswith(prefix) and child(d) != child(module))
    cycles = [c for c in _cycles(lifted) if not any(frozenset(c) == k for k in KNOWN_CYCLES)]
    assert not cycles, f"in {package}, these need each other (one of the imports runs upward): {cycles}"


def test_only_cli_imports_cli():
    bad = sorted(m for m, deps in GRAPH.items() if not m.startswith(f"{PKG}.cli")
                 and any(d == f"{PKG}.cli" or d.startswith(f"{PKG}.cli.") for d in deps))
    assert not bad, f"library modules importing the command line: {bad}"


def test_no_module_is_long():
    long = {}
    for path in (ROOT / PKG).rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in LONG:
            long[rel] = lines
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"


OLD_FLAT = ("features", "frc", "policy", "scorers", "presses", "models", "model_names", "instruct", "prefill",
            "pipeline", "intervals", "precision", "timing_stats", "analysis", "claims", "checks", "report",
            "inspection", "notebooks", "latency", "atomic", "ray_util", "timers", "progress", "notebook_progress",
            "run_timings")
OLD_ARENA = ("harness", "items", "splits", "calibrate", "math500", "math_answers", "submission", "method_api",
             "press", "sandbox", "child", "convert", "safe_files", "score", "gate", "points", "ledger", "leaderboard",
             "signing", "verify", "rounds", "refusals")


def test_one_home_per_module():
    """No file (a shim) is left where a module lived before the moves."""
    left = [f"{PKG}/{m}.py" for m in OLD_FLAT if (ROOT / PKG / f"{m}.py").exists()]
    left += [f"{PKG}/arena/{m}.py" for m in OLD_ARENA if (ROOT / PKG / "arena" / f"{m}.py").exists()]
    left += [p for p in (f"{PKG}/policy_programs", f"{PKG}/plots", f"{PKG}/search/fresh.py") if (ROOT / p).exists()]
    assert not left, f"left at old paths: {left}"
    names = {p.name for p in (ROOT / PKG).rglob("*.py")}
    assert "registry.py" in names and not (ROOT / PKG / "presses.py").exists()
