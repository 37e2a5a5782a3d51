"""What a search needs to repeat exactly, set by the code rather than by the user's shell.

A run with the offline mutator is a deterministic function of its seed only if

- the interpreters that run OpenEvolve's database (the controller) and its worker use a fixed string hash:
  the database samples parents from lists built from ``set`` s of program ids, whose order follows
  ``hash(str)``, randomised per process unless ``PYTHONHASHSEED`` is fixed *before the interpreter starts*;
- program ids are not ``uuid4`` (random) but seeded counters, per process role (``deterministic_ids``);
- one worker evaluates (``parallel_evaluations = 1``), and no wall-clock limit can change a candidate's
  verdict (the sandbox limits CPU time; OpenEvolve's own timeout is a backstop far beyond any evaluation).

``hash_seed_fixed`` tells whether this interpreter qualifies; ``deterministic_env`` is the environment of
one that does; ``evolve_async`` re-runs itself in such a process when the current one does not.
"""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from collections.abc import Callable, Mapping

HASH_SEED = "0"
IDS_ENV = "CACHECRAFT_IDS_SEED"  # tells a spawned worker which seed its ids derive from
_ORIGINAL_UUID4 = uuid.uuid4


def hash_seed_fixed() -> bool:
    """True when this interpreter was started with ``PYTHONHASHSEED=0`` (string hashes repeat across runs)."""
    return sys.flags.hash_randomization == 0


def deterministic_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the fixed hash seed, for a child interpreter."""
    return {**(os.environ if env is None else env), "PYTHONHASHSEED": HASH_SEED}


def _seeded_uuid4(seed: int, role: Callable[[], str]) -> Callable[[], uuid.UUID]:
    counter = itertools.count()

    def fake_uuid4() -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_OID, f"cachecraft:{seed}:{role()}:{next(counter)}")

    fake_uuid4.cachecraft_seed = seed  # type: ignore[attr-defined]
    return fake_uuid4


def deterministic_ids(seed: int) -> None:
    """Replace ``uuid.uuid4`` with seeded, counter-based ids: ``main`` here, ``worker`` in forked children."""
    main_pid = os.getpid()
    uuid.uuid4 = _seeded_uuid4(seed, lambda: "main" if os.getpid() == main_pid else "worker")  # type: ignore[assignment]
    os.environ[IDS_ENV] = str(seed)


def worker_ids() -> None:
    """In a worker started by ``spawn`` (a fresh interpreter, no patched ``uuid4``): the worker's seeded ids.

    Called when the evaluator file loads, before the worker names its first child; a forked worker already
    carries the controller's patch and is left alone.
    """
    seed = os.environ.get(IDS_ENV)
    if seed is not None and not hasattr(uuid.uuid4, "cachecraft_seed"):
        uuid.uuid4 = _seeded_uuid4(int(seed), lambda: "worker")  # type: ignore[assignment]


def restore_ids() -> None:
    """Put back the real ``uuid4`` (a notebook kernel goes on using it after the search)."""
    uuid.uuid4 = _ORIGINAL_UUID4  # type: ignore[assignment]
    os.environ.pop(IDS_ENV, None)
