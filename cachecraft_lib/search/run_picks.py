"""A finished run's programs, best first: its recorded best (``best/best_program_info.json``) and its top K
distinct valid children, as ``selection`` shortlists them and ``arena submit-search --top K`` submits them.

Below both ``selection`` and ``submit`` (which carries the selection's digests into an entry), so neither has
to import the other."""

from __future__ import annotations

import json
from pathlib import Path

from ..arena.submissions.from_program import find_program
from .runlog import load_run


def best_id(run_folder: str | Path) -> str | None:
    """The id of the program ``best/best_program.py`` holds (OpenEvolve's ``best_program_info.json``)."""
    info = Path(run_folder) / "best" / "best_program_info.json"
    return json.loads(info.read_text()).get("id") if info.exists() else None


def top_children(run_folder: str | Path, k: int) -> list[tuple[str, str]]:
    """The run's ``k`` best distinct programs as (child id, code), best first: valid children by fitness (the
    earlier child wins a tie), a program's code counted once; the run's recorded best always leads."""
    trace = load_run(run_folder).trace
    first = best_id(run_folder)
    if trace.empty:
        return [(first or "best", find_program(run_folder).read_text())][:k]
    ranked = trace[trace.valid].assign(is_best=lambda t: t.child_id == first)
    ranked = ranked.sort_values(["is_best", "fitness", "iteration"], ascending=[False, False, True], kind="stable")
    out: list[tuple[str, str]] = []
    for child_id, code in zip(ranked.child_id, ranked.code, strict=True):
        if code and code not in {c for _, c in out}:
            out.append((str(child_id), code))
        if len(out) == k:
            break
    return out
