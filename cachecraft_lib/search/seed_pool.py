"""Several random seeds as the unit of evidence (issue 49, item 3): how many beat a reference, and a pooled gain.

Why: one search run's submission is partly luck (which child tops a noisy dev score), so the best of several
seeds says little about what the search does. Every seed's selected program is scored on the same hidden test
units; the result is (a) how many seeds' programs beat the reference (each one's own paired gate: the lower
end of its 95% interval over units above the board's threshold) and (b) the **pooled** gain: on each unit the
mean over seeds of (program - reference), with the arena's paired bootstrap over units stratified by task
(``scoring.gate.gate``). The pooled gain is what a run of the search is expected to gain, never the best seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..arena.scoring.gate import gate

GATE_SEED = 0  # the bootstrap's seed, as notebook 08's comparison with FRC


@dataclass
class SeedPool:
    """Per seed: its gain over the reference with its interval and whether it beats it; then the pooled gain."""

    reference: str
    per_seed: pd.DataFrame  # random_seed, name, gain, lo, hi, beats
    pooled_gain: float
    pooled_lo: float
    pooled_hi: float
    threshold: float

    @property
    def beats(self) -> int:
        return int(self.per_seed.beats.sum())

    def summary(self) -> str:
        return (f"{self.beats} of {len(self.per_seed)} seeds beat {self.reference}; pooled gain "
                f"{self.pooled_gain:+.3f} [{self.pooled_lo:+.3f}, {self.pooled_hi:+.3f}] (95% paired interval over "
                f"units, the mean over seeds on each unit)")

    def rows(self, split: str) -> list[dict]:
        """The results table's rows (notebook 08): one per seed, then ``pooled``, each against the reference."""
        out = [{"split": split, "against": self.reference, "random_seed": str(r.random_seed), "gain": r.gain,
                "lo": r.lo, "hi": r.hi} for r in self.per_seed.itertuples()]
        return out + [{"split": split, "against": self.reference, "random_seed": "pooled", "gain": self.pooled_gain,
                       "lo": self.pooled_lo, "hi": self.pooled_hi}]


def verdict(lo: float, hi: float, threshold: float) -> str:
    """A gain's verdict from its interval: past the gate, below zero, inconclusive, or none without an interval."""
    if pd.isna(lo) or pd.isna(hi):
        return "no interval (one context per task)"
    return "passes the gate" if lo > threshold else ("below" if hi < 0 else "inconclusive")


def _by_unit(units: pd.DataFrame, what: str) -> pd.DataFrame:
    """Rows by unit, in (task, context) order: the order the bootstrap's draws pair with (docs/uncertainty.md's
    recipe pivots the committed file into the same order)."""
    if units is None or units.empty:
        raise ValueError(f"no per-unit test values for {what}")
    return units.sort_values(["task", "context_id"]).set_index("context_id")


def pool_seeds(units: dict[int, pd.DataFrame], names: dict[int, str], reference: pd.DataFrame, reference_name: str,
               threshold: float) -> SeedPool:
    """``units``: each seed's per-unit test rows (``context_id``, ``task``, ``overall``: the arena's private
    files); ``reference``: the reference's rows on the same units."""
    ref = _by_unit(reference, reference_name)
    rows, frames = [], []
    for seed, frame in units.items():
        mine = _by_unit(frame, names[seed])
        if set(mine.index) != set(ref.index):
            raise ValueError(f"seed {seed}'s program and {reference_name} were not scored on the same units")
        g = gate(mine.overall, ref.overall.reindex(mine.index), mine.task, threshold, seed=GATE_SEED)
        rows.append({"random_seed": seed, "name": names[seed], "gain": g.gain, "lo": g.lo, "hi": g.hi,
                     "beats": bool(g.passed)})
        frames.append(mine.overall.rename(seed))
    if not rows:
        raise ValueError("no seed to pool")
    mean = pd.concat(frames, axis=1).mean(axis=1)
    tasks = _by_unit(next(iter(units.values())), "tasks").task
    pooled = gate(mean, ref.overall.reindex(mean.index), tasks.reindex(mean.index), threshold, seed=GATE_SEED)
    return SeedPool(reference_name, pd.DataFrame(rows), pooled.gain, pooled.lo, pooled.hi, threshold)
