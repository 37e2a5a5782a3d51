"""Run a search in a fresh interpreter with the fixed hash seed: ``python -m cachecraft_lib.search.isolated_run SPEC``.

``PYTHONHASHSEED`` only takes effect when an interpreter starts, so a process started without it (a Jupyter
kernel opened by hand, a shell without the variable) cannot make its own search repeatable. ``evolve_async``
then hands the run to this module: the arguments go in a JSON spec next to the run, the child runs the
search in-process, and its output is streamed back line by line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..profiles import Profile
from .determinism import deterministic_env

SPEC_NAME = "fresh_process_spec.json"


def profile_from_dict(data: dict[str, Any]) -> Profile:
    """A ``Profile`` from ``Profile.to_dict()`` after a JSON round trip (lists back to tuples)."""
    def tuples(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: tuples(v) for k, v in value.items()}
        return tuple(tuples(v) for v in value) if isinstance(value, list) else value

    known = {f.name for f in fields(Profile)}
    return Profile(**{k: tuples(v) for k, v in data.items() if k in known})


def write_spec(out_dir: Path, profile: Profile, **kwargs: Any) -> Path:
    """The arguments of ``evolve_async`` as JSON in the run folder (paths as strings)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = {"profile": profile.to_dict(), "out_dir": str(out_dir),
            **{k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}}
    path = out_dir / SPEC_NAME
    path.write_text(json.dumps(spec, indent=1))
    return path


async def run_spec(spec: Path) -> None:
    """Run the spec in a child interpreter with ``PYTHONHASHSEED=0``, echoing its output; raise if it fails."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "cachecraft_lib.search.isolated_run", str(spec),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                env=deterministic_env())
    tail: list[str] = []
    assert proc.stdout is not None
    async for raw in proc.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        tail = (tail + [line])[-40:]
        print(line, flush=True)
    if await proc.wait() != 0:
        raise RuntimeError(f"the search in a fresh process failed (exit {proc.returncode}); its last lines:\n"
                           + "\n".join(tail))
