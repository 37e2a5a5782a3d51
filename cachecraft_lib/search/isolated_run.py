"""The child side of ``isolate``: ``python -m cachecraft_lib.search.isolated_run SPEC`` runs the search the spec
describes in this interpreter (started with ``PYTHONHASHSEED=0``). Kept apart from ``isolate`` so that ``evolve``
imports ``isolate`` and only this entry point imports ``evolve`` (no import cycle)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .isolate import profile_from_dict


def main(argv: list[str] | None = None) -> int:
    from .determinism import hash_seed_fixed
    from .evolve import NoCandidates, evolve
    from .health import EveryChildFailed

    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    if not hash_seed_fixed():  # never recurse: this process exists to have the fixed seed
        raise SystemExit("cachecraft_lib.search.isolated_run must run with PYTHONHASHSEED=0")
    profile = profile_from_dict(spec.pop("profile"))
    llm = spec.pop("llm", {})
    try:
        best = evolve(profile=profile, isolate=False, **spec, **llm)
    except (NoCandidates, EveryChildFailed) as err:  # said plainly; the parent reports the exit code
        print(f"{type(err).__name__}: {err}", flush=True)
        return 1
    if best is not None:
        print(f"best program {best.id}: {best.metrics}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
