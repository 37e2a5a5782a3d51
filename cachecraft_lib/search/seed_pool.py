"""Several random seeds as the unit of evidence (issues 49 and 56): per seed, the seeds pooled, and a run.

Why: one search run's submission is partly luck (which child tops a noisy dev score, and which start the climb
took), so the best of several seeds says little about what the search does. Every seed's selected program is scored
on the same hidden test units against a comparator (FRC, the selection half's best baseline, the seed program, or
the random-search control run with the same seed), and three rows come out:

- per seed: its gain with the arena's paired interval over units (``scoring.gate.gate``) and whether it passes the
  board's threshold;
- ``pooled``: on each unit the mean over these seeds of (program - comparator), units resampled with the seeds
  fixed: it describes these seeds' programs, and nothing about another run;
- ``a run``: the two-level bootstrap (``stats.two_level.run_gain``: seeds resampled, then units within tasks) of the
  same mean: what a run of the search gains, as far as these seeds show it. With fewer than two seeds it says it
  could not resample seeds. With few it is wide: on board A two seeds of one plan once landed 0.26 apart on the
  test items, and five seeds of issue 56's plan 0.24 apart (a run's gain over FRC -0.09 [-0.18, -0.02]).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..arena.scoring.gate import gate
from ..stats import two_level
from ..stats.two_level import RunGain

GATE_SEED = 0  # the bootstrap's seed, as notebook 08's comparison with FRC
RUN_ROW = "a run"  # the table's label of the two-level row


@dataclass
class SeedPool:
    """Per seed: its gain over the comparator with its interval and whether it beats it; the seeds pooled (units
    resampled); a run (seeds and units resampled)."""

    reference: str
    per_seed: pd.DataFrame  # random_seed, name, gain, lo, hi, beats
    pooled_gain: float
    pooled_lo: float
    pooled_hi: float
    threshold: float
    run: RunGain | None = None

    @property
    def beats(self) -> int:
        return int(self.per_seed.beats.sum())

    def summary(self) -> str:
        text = (f"{self.beats} of {len(self.per_seed)} seeds beat {self.reference}; pooled over these seeds "
                f"{self.pooled_gain:+.3f} [{self.pooled_lo:+.3f}, {self.pooled_hi:+.3f}] (units resampled)")
        if self.run is not None:
            text += f"; a run of the search: {self.run} ({two_level.verdict(self.run, self.threshold)})"
        return text

    def rows(self, split: str) -> list[dict]:
        """The results table's rows (notebook 08): one per seed, ``pooled``, then ``a run``, each naming the
        comparator."""
        out = [{"split": split, "against": self.reference, "random_seed": str(r.random_seed), "gain": r.gain,
                "lo": r.lo, "hi": r.hi} for r in self.per_seed.itertuples()]
        out.append({"split": split, "against": self.reference, "random_seed": "pooled", "gain": self.pooled_gain,
                    "lo": self.pooled_lo, "hi": self.pooled_hi})
        if self.run is not None:
            out.append({"split": split, "against": self.reference, "random_seed": RUN_ROW, "gain": self.run.point,
                        "lo": self.run.lo, "hi": self.run.hi, "seeds": self.run.seeds})
        return out


def verdict(lo: float, hi: float, threshold: float) -> str:
    """A gain's verdict from its interval: past the gate, below zero, inconclusive, or none without an interval."""
    if pd.isna(lo) or pd.isna(hi):
        return "no interval (one context per task)"
    return "passes the gate" if lo > threshold else ("below" if hi < 0 else "inconclusive")


def row_verdict(row: dict, threshold: float) -> str:
    """A table row's verdict: ``a run`` rows by ``stats.two_level.verdict`` (which says when it rests on one seed),
    the others by ``verdict``."""
    if row.get("random_seed") == RUN_ROW:
        gain = RunGain(row["gain"], row["lo"], row["hi"], int(row.get("seeds", 2)), 0, int(row.get("seeds", 2)) >= 2)
        return two_level.verdict(gain, threshold)
    return verdict(row["lo"], row["hi"], threshold)


def _by_unit(units: pd.DataFrame, what: str) -> pd.DataFrame:
    """Rows by unit, in (task, context) order: the order the bootstrap's draws pair with (docs/uncertainty.md's
    recipe pivots the committed file into the same order)."""
    if units is None or units.empty:
        raise ValueError(f"no per-unit test values for {what}")
    return units.sort_values(["task", "context_id"]).set_index("context_id")


def pool_seeds(units: dict[int, pd.DataFrame], names: dict[int, str],
               reference: pd.DataFrame | dict[int, pd.DataFrame], reference_name: str, threshold: float) -> SeedPool:
    """``units``: each seed's per-unit test rows (``context_id``, ``task``, ``overall``: the arena's private
    files); ``reference``: the comparator's rows on the same units, or one frame per seed (the random-search control
    run with that seed)."""
    refs = reference if isinstance(reference, dict) else {s: reference for s in units}
    rows, frames, diffs = [], [], []
    for seed, frame in units.items():
        mine, ref = _by_unit(frame, names[seed]), _by_unit(refs[seed], reference_name)
        if set(mine.index) != set(ref.index):
            raise ValueError(f"seed {seed}'s program and {reference_name} were not scored on the same units")
        g = gate(mine.overall, ref.overall.reindex(mine.index), mine.task, threshold, seed=GATE_SEED)
        rows.append({"random_seed": seed, "name": names[seed], "gain": g.gain, "lo": g.lo, "hi": g.hi,
                     "beats": bool(g.passed)})
        frames.append(mine.overall.rename(seed))
        diffs.append((mine.overall - ref.overall.reindex(mine.index)).rename(seed))
    if not rows:
        raise ValueError("no seed to pool")
    mean = pd.concat(diffs, axis=1).mean(axis=1)
    tasks = _by_unit(next(iter(units.values())), "tasks").task.reindex(mean.index)
    pooled = gate(mean, pd.Series(0.0, index=mean.index), tasks, threshold, seed=GATE_SEED)
    table = two_level.diffs_table({names[s]: units[s] for s in units}, {names[s]: refs[s] for s in units})
    return SeedPool(reference_name, pd.DataFrame(rows), pooled.gain, pooled.lo, pooled.hi, threshold,
                    two_level.run_gain(table, seed=GATE_SEED))


def missing_from_plan(plan: dict, methods: set[str], best_baseline: str | None = None) -> list[str]:
    """What the recorded ``plan`` (a plan event's payload) promised to compare with, for every seed, and the test
    units in hand (``methods``: the per-unit file's names) lack: a comparator, the seed program or one seed's
    random-search pick. Empty when the results can answer the plan; a dropped control is named, never skipped."""
    from . import plan_comparisons as named
    from .random_control import control_name, seed_control_name

    seed, seeds = plan["seed_program"], plan["random_seeds"]
    wanted = {f"search-{seed}-{s}" for s in seeds}
    for c in plan.get("comparators") or []:
        wanted.add(best_baseline if c == named.SELECTION_BEST else c)
    if named.SEED_CONTROL in (plan.get("controls") or []):
        wanted.add(seed_control_name(seed))
    if named.RANDOM_CONTROL in (plan.get("controls") or []):
        wanted |= {control_name(seed, s) for s in seeds}
    missing = sorted(str(w) for w in wanted if w not in methods)
    if not plan.get("comparators"):
        missing.insert(0, "the plan names no comparator")
    return missing
