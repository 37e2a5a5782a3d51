"""The judges' calibration before launch (the arena post): every baseline the interface expresses, submitted
with its name, author, docstrings and comments removed and a DESCRIPTION that names nothing, must be rated
novelty <= 1 and traced to its source paper. ``calibration_table()`` runs it; ``anonymise`` builds one entry."""

from __future__ import annotations

import ast
import re
import tempfile
from pathlib import Path
from typing import Any

from .bundle import load_bundle
from .references import PUBLISHED
from .rules import review_rules

BASELINES = Path(__file__).resolve().parents[1] / "examples" / "baselines"
SOURCE = {"snapkv": "SnapKV", "tova": "TOVA", "knorm": "K-norm", "streaming_llm": "StreamingLLM",
          "adasnapkv": "Ada-KV over SnapKV"}
"""Example folder -> the published method (``references.PUBLISHED``) a judge must name; ``A over B``: the
allocation A over the scores of B (both must be named)."""


def sources(source: str) -> tuple[str, ...]:
    """The published methods (``references.PUBLISHED`` keys) a ``SOURCE`` value names."""
    return tuple(source.split(" over "))

BLANK_DESCRIPTION = """# entry {n}

## Idea
A per-token score decides which cache entries each KV head keeps.

## Method
The score is computed in method.py from the layer's keys and the window's queries; the harness keeps the
budget highest scores per KV head.

## Relation to prior work
Withheld for the judges' calibration: the judge must find it.

## Evidence
None claimed.

## Limitations
Not stated for the calibration entry; the judge reads the code.

## Builds on
The arena's method interface.
"""


def _strip(code: str) -> str:
    """``code`` without docstrings and comments (``ast.unparse`` drops comments; docstrings are removed here)."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


def anonymise(folder: str | Path, dest: str | Path, n: int) -> Path:
    """A copy of the submission in ``folder`` at ``dest`` named ``entry-n`` by ``anonymous``, naming nothing."""
    folder, dest = Path(folder), Path(dest)
    dest.mkdir(parents=True, exist_ok=False)
    (dest / "method.py").write_text(_strip((folder / "method.py").read_text()))
    meta = (folder / "metadata.yaml").read_text()
    kept = [m.group(0) for key in ("boards", "allocation") if (m := re.search(rf"^{key}:.*$", meta, re.MULTILINE))]
    (dest / "metadata.yaml").write_text(f"name: entry-{n}\nauthor: anonymous\n" + "\n".join(kept) + "\n")
    (dest / "DESCRIPTION.md").write_text(BLANK_DESCRIPTION.format(n=n))
    return dest


def named_source(review: Any) -> str | None:
    """The published method the review traces the code to: the copy or behaviour it names, else the closest;
    ``A over B`` when the review also names an allocation A (Ada-KV's head-adaptive budgets) over it."""
    named = None
    for note in review.notes:
        if "is a copy of" in note or "behaves as" in note:
            found = [m for m in PUBLISHED if re.search(rf"\({re.escape(m)}[,)]", note)]
            if found:
                named = found[0]
                break
    if named is None:
        closest = review.details.get("closest") or []
        named = closest[0]["method"] if closest else None
    allocation = [m for note in review.notes if "head-adaptive budgets" in note
                  for m in PUBLISHED if re.search(rf"\({re.escape(m)}, ", note)]
    return f"{allocation[0]} over {named}" if allocation and named else named


def calibrate(folder: str | Path, source: str, n: int, work: Path, layers: list | None = None) -> dict[str, Any]:
    """One calibration row: the rule judge's review of ``folder`` anonymised, against its ``source``."""
    review = review_rules(load_bundle(anonymise(folder, work / f"entry-{n}", n)), layers=layers)
    named = named_source(review)
    return {"baseline": Path(folder).name, "entry": f"entry-{n}", "judge": review.judge, "novelty": review.novelty,
            "source": source, "named": named, "right_source": named == source,
            "flags": ", ".join(review.flags) or "-", "passes": review.novelty <= 1 and named == source}


def calibration_table(layers: list | None = None, folders: dict[str, str] | None = None):
    """The calibration table (a DataFrame, one row per baseline) of the rule judge; ``layers``: real board layers
    (``layers.arena_layers``) for the behaviour check beside the probes. ``UNDISCLOSED_PRIOR_ART`` is the flag
    a correctly identified anonymous copy earns."""
    import pandas as pd

    folders = folders or {name: str(BASELINES / name) for name in SOURCE}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [calibrate(path, SOURCE[Path(path).name], n, Path(tmp), layers)
                for n, path in enumerate(sorted(folders.values()), start=1)]
    return pd.DataFrame(rows)
