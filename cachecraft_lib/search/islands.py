"""Islands with restarts: several independent elites in one run, so one bad start does not decide a random seed.

Each island keeps its own elite and proposes its share of every generation's children from it (a seeded
tournament of two, best first, as ``board_search`` draws parents). An island that has not improved for
``patience`` generations while another island holds a better program starts again from the seed program (its
elite emptied to the seed's entry): its budget goes to a fresh start instead of a dead end. The run's best is the
best of all islands. Deterministic: no draw here, only the caller's seeded ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

ELITE = 4  # programs kept per island (board_search's elite size)
PATIENCE = 3  # generations without improvement before a lagging island restarts


@dataclass(frozen=True)
class Entry:
    """A fully scored program in an elite."""

    fitness: float
    child_id: str
    code: str


@dataclass
class Island:
    """One island: its elite (best first), generations since it last improved, how often it restarted."""

    index: int
    elite: list[Entry] = field(default_factory=list)
    stale: int = 0
    restarts: int = 0

    @property
    def best(self) -> Entry:
        return self.elite[0]

    def parent(self, rng: random.Random) -> Entry:
        """A tournament of two over the elite (the better wins), as ``board_search`` draws its parents."""
        return self.elite[min(rng.sample(range(len(self.elite)), min(2, len(self.elite))))]

    def add(self, entries: list[Entry]) -> bool:
        """Take fully scored children into the elite; True when the island's best improved."""
        before = self.best.fitness
        self.elite = sorted(self.elite + entries, key=lambda e: -e.fitness)[:ELITE]
        improved = self.best.fitness > before
        self.stale = 0 if improved else self.stale + 1
        return improved


@dataclass
class Archipelago:
    """The run's islands, all starting from the seed program's entry."""

    islands: list[Island]
    seed: Entry
    patience: int = PATIENCE

    @classmethod
    def start(cls, n: int, seed: Entry, patience: int = PATIENCE) -> Archipelago:
        if n < 1:
            raise ValueError(f"at least one island, got {n}")
        return cls([Island(i, [seed]) for i in range(n)], seed, patience)

    @property
    def best(self) -> Entry:
        return max((isl.best for isl in self.islands), key=lambda e: e.fitness)

    def island_of(self, slot: int) -> Island:
        """Slot ``slot`` of a generation belongs to island ``slot mod n`` (the islands share each generation)."""
        return self.islands[slot % len(self.islands)]

    def restart_lagging(self) -> list[int]:
        """Restart from the seed every island stale for ``patience`` generations and behind the run's best; their
        indices. The island holding the run's best never restarts."""
        best = self.best.fitness
        restarted = []
        for isl in self.islands:
            if isl.stale >= self.patience and isl.best.fitness < best:
                isl.elite, isl.stale = [self.seed], 0
                isl.restarts += 1
                restarted.append(isl.index)
        return restarted
