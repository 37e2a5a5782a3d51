"""Which committed files under ``figures/`` each notebook writes.

Read from the notebook's own cells: every ``savefig(name)`` (PNG and PDF), ``save_table(df, name)`` (CSV, Markdown,
LaTeX) and ``save_samples(df, name)`` (``samples/<name>.csv.gz``); an f-string name matches the committed files
its fixed parts allow. ``figures/samples/NN_*`` belong to notebook NN (its ledgers, programs and shortlists are
written by library calls). What a library function writes on a notebook's behalf is listed in
``LIBRARY_WRITES``; ``tests/test_pipeline.py`` checks that every committed file is claimed by exactly one stage.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

from .pipeline_deps import notebook_source

FIGURES = "figures"
EXTENSIONS = {"savefig": ("png", "pdf"), "save_table": ("csv", "md", "tex")}
NAME_ARG = {"savefig": 0, "save_table": 1, "save_samples": 1}
# written by a library function the notebook calls (arena.scoring.leaderboard.save_leaderboard)
LIBRARY_WRITES = {"07_arena": ("table_arena_leaderboard", "fig_arena_leaderboard")}
# committed under figures/ but written by no notebook: the guide, and a round's secret revealed after the round
NOT_OUTPUTS = ("figures/README.md", "figures/samples/*_revealed_secret.txt")


def _pattern(node: ast.expr) -> str | None:
    """A name argument as a glob: a literal as is, an f-string with ``*`` for each formatted part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def saved_names(source: str) -> list[tuple[str, str]]:
    """(writer, name pattern) for each ``savefig`` / ``save_table`` / ``save_samples`` call in a source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        writer = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if writer not in NAME_ARG:
            continue
        arg = next((k.value for k in node.keywords if k.arg == "name"), None)
        if arg is None and len(node.args) > NAME_ARG[writer]:
            arg = node.args[NAME_ARG[writer]]
        pattern = _pattern(arg) if arg is not None else None
        if pattern:
            found.append((writer, pattern))
    return found


def output_patterns(notebook: Path) -> list[str]:
    """Repo-relative globs of the files a notebook writes under ``figures/``."""
    patterns = [f"{FIGURES}/samples/{notebook.stem[:2]}_*"]
    writes = saved_names(notebook_source(notebook))
    writes += [("save_table", n) for n in LIBRARY_WRITES.get(notebook.stem, ()) if n.startswith("table_")]
    writes += [("savefig", n) for n in LIBRARY_WRITES.get(notebook.stem, ()) if n.startswith("fig_")]
    for writer, name in writes:
        if writer == "save_samples":
            patterns.append(f"{FIGURES}/samples/{name}.csv.gz")
        else:
            patterns += [f"{FIGURES}/{name}.{ext}" for ext in EXTENSIONS[writer]]
    return patterns


def top_level(path: str) -> str:
    """A file inside a folder of ``figures/samples`` stands for that folder (a program folder is one output)."""
    parts = path.split("/")
    return "/".join(parts[:3]) if len(parts) > 3 and parts[1] == "samples" else path


def notebook_outputs(notebook: Path, tracked: set[str]) -> list[str]:
    """The committed files (and sample folders) a notebook writes, sorted."""
    patterns = output_patterns(notebook)
    committed = {top_level(t) for t in tracked if t.startswith(f"{FIGURES}/")}
    return sorted(p for p in committed if any(fnmatch.fnmatchcase(p, g) for g in patterns)
                  and not any(fnmatch.fnmatchcase(p, n) for n in NOT_OUTPUTS))
