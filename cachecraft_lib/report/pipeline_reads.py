"""What a notebook reads that another notebook made, found in its code cells with ``ast`` (never run).

Two kinds of place, told apart because only one can be a pipeline dependency:

- ``figures/samples/NN_*``: notebook NN's committed outputs (``pipeline_outs`` gives them to NN's stage). A
  notebook that names one of another notebook's (a string ``"05_search_best_program.txt"`` or
  ``"figures/samples/05_..."``) reads it: the file is a dependency of the reader's stage and an output of NN's,
  so DVC reruns NN first and the reader after it. A committed ``"data/..."`` path named as a string (not
  ``data/results``) is a dependency too.
- ``data/results/<kind>``: run folders (the grid's, the search's), ignored by git. A notebook may keep its own
  there (a cache of its run); one that names another notebook's reads a file a fresh clone does not have, so its
  committed outputs would depend on something no stage records. Named as ``DATA / "results" / "<kind>"``,
  ``results_dir("<kind>", ...)`` or a ``"data/results/<kind>/..."`` string; the first notebook (in the
  notebooks' order) that names a kind owns it.

``tests/test_pipeline.py`` checks both against ``dvc.yaml``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from .pipeline_deps import notebook_source

SAMPLES = "figures/samples"
RESULTS = "data/results"
SAMPLE_NAME = re.compile(r"^(\d\d)_[\w.-]+$")  # a file (or folder) of figures/samples, by its notebook's number
SAMPLES_SUFFIX = ".csv.gz"  # what save_samples adds to a bare name


@dataclass
class Reads:
    """The places a notebook's code names: other notebooks' committed samples, and run folders' kinds."""

    samples: set[str] = field(default_factory=set)  # repo-relative, under figures/samples, another notebook's
    data: set[str] = field(default_factory=set)  # "data/..." strings outside data/results (committed inputs)
    results: set[str] = field(default_factory=set)  # data/results/<kind>


def _sample_path(text: str, own: str) -> str | None:
    """The repo path a string names under figures/samples, when another notebook (not ``own``, ``"07"``) made it."""
    name = text[len(SAMPLES) + 1:] if text.startswith(SAMPLES + "/") else text
    name = name.split("/")[0]
    match = SAMPLE_NAME.match(name)
    if not match or match.group(1) == own:
        return None
    return f"{SAMPLES}/{name if '.' in name else name + SAMPLES_SUFFIX}"


def _results_kind(node: ast.AST) -> str | None:
    """``data/results/<kind>`` when ``node`` names a run folder (see the module docstring), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(RESULTS + "/"):
        kind = node.value[len(RESULTS) + 1:].split("/")[0]
        return f"{RESULTS}/{kind}" if kind else None
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0] if node.args else None
        if name == "results_dir" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            return f"{RESULTS}/{first.value}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
        left = node.left  # (DATA / "results") / "<kind>"
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Div) and isinstance(left.right, ast.Constant) \
                and left.right.value == "results":
            base = left.left
            if (isinstance(base, ast.Name) and base.id == "DATA") or \
                    (isinstance(base, ast.Attribute) and base.attr == "DATA"):
                return f"{RESULTS}/{node.right.value}"
    return None


def source_reads(source: str, own: str) -> Reads:
    """What a source names (``own``: its notebook's number, whose own samples are outputs, not reads)."""
    reads = Reads()
    for node in ast.walk(ast.parse(source)):
        kind = _results_kind(node)
        if kind:
            reads.results.add(kind)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            sample = _sample_path(node.value, own)
            if sample:
                reads.samples.add(sample)
            elif node.value.startswith("data/") and not node.value.startswith(RESULTS + "/"):
                reads.data.add(node.value.rstrip("/"))
    return reads


def notebook_reads(notebook: Path) -> Reads:
    """What a notebook's code cells name (``notebooks/07_arena.ipynb``: notebook 05's best program)."""
    return source_reads(notebook_source(notebook), notebook.stem[:2])


def results_owners(notebooks: list[Path]) -> dict[str, str]:
    """Each run folder's kind -> the first notebook (by name's order) that names it: its own cache."""
    owners: dict[str, str] = {}
    for notebook in sorted(notebooks):
        for kind in sorted(notebook_reads(notebook).results):
            owners.setdefault(kind, notebook.stem)
    return owners
