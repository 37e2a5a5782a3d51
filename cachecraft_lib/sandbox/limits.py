"""What sandboxed code may use: the one set of limits every caller passes, and the wall budget they share.

Kept apart from ``box`` (which enforces them) so that a caller sees the whole contract in one short file:
``Limits`` per sandbox, ``WallBudget`` per evaluation (the arena opens one sandbox per context, and a fresh
sandbox must not mean a fresh budget).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

WALL_PER_CALL = 4.0  # wall seconds a call earns the evaluation, per CPU second of its limit


@dataclass
class WallBudget:
    """Wall-clock seconds of one evaluation, shared by every sandbox it opens (the arena opens one per context):
    a fresh sandbox must not mean a fresh budget.

    ``total_s`` caps it; within that the evaluation has what its own work earns (``earned_s``): each start its
    load limit, each call ``WALL_PER_CALL`` times its CPU limit. So the budget is sized by the board (its
    contexts, budgets and layers) with a margin over an honest run, which uses a fraction of each CPU limit: a
    method sleeping under each call's backstop no longer holds a small board for ``total_s`` (an hour by
    default). ``cpu_after_s``: CPU the evaluation's sandboxes used after their last replies (``Box.close``)."""

    total_s: float
    used_s: float = 0.0
    earned_s: float = 0.0
    cpu_after_s: float = 0.0

    @property
    def allowed_s(self) -> float:
        """The seconds the evaluation may take so far: what it earned, at most ``total_s``."""
        return min(self.total_s, self.earned_s)

    @property
    def left_s(self) -> float:
        return self.allowed_s - self.used_s


@dataclass(frozen=True)
class Limits:
    """What sandboxed code may use: CPU seconds per call (``timeout_s``), memory (MB beyond its start, whole
    sandbox), seconds to load, wall seconds per evaluation, bytes of one reply; ``allow_weak`` runs it behind
    less than a whole boundary (``boundary``; recorded by name)."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    load_s: float = 30.0
    wall_s: float = 3600.0
    allow_weak: bool = False
    max_payload: int = 64 << 20  # bytes of one reply (an answer is a few MB at most)

    @classmethod
    def of(cls, **limits: Any) -> Limits:
        names = [f.name for f in fields(cls)]
        unknown = set(limits) - set(names)
        if unknown:
            raise TypeError(f"unknown sandbox limits {sorted(unknown)}; limits: {', '.join(names)}")
        return cls(**limits)
