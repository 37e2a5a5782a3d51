"""A plan's pass criteria, fixed before the run and read once as verdicts (issue 56, item 4).

Why: criteria written only as prose in a plan's notes can be re-read after the numbers exist ("4 of 5" becomes
"most", a margin drifts). Here each criterion is data in the plan (``Plan.criteria``, hashed with it): which
comparator, which row (each seed, or ``a run``: seeds resampled), the margin the lower bound must clear, and for
per-seed criteria how many seeds must clear it. ``judge`` reads the test rows once and gives one row per criterion,
three-valued:

- per seed: a seed *meets* when its lower bound is above the margin, *misses* when its upper bound is below it,
  else it is undecided. The criterion is met when at least ``required`` seeds meet, not met when even counting
  every undecided seed fewer than ``required`` could, and inconclusive in between;
- a run: met when the run's lower bound is above the margin, not met when its upper bound is below it, else
  inconclusive (and inconclusive, saying so, when it rests on one seed: no seed level was resampled).

``issue56`` writes the issue's criteria for a board: on board A, at least 4 of 5 seeds (the same share of the
plan's seeds: ``required_of``) non-inferior to FRC (lower bound above -0.02) and a run's lower bound above -0.01;
on B_offline every seed beats the selection half's best baseline (lower bound above the board's gate threshold,
the arena's meaning of "beats"); on both, a run's gain over random search and over the seed program above 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from .plan_comparisons import FRC, RANDOM_CONTROL, SEED_CONTROL, SELECTION_BEST

PER_SEED, RUN = "each seed", "a run"  # the levels a criterion reads (seed_pool's per-seed rows, its ``a run`` row)
MET, NOT_MET, INCONCLUSIVE = "met", "not met", "inconclusive"
NON_INFERIORITY_MARGIN = -0.02  # board A: a seed is non-inferior to FRC when its lower bound is above this
RUN_MARGIN_A = -0.01  # board A: a run's lower bound (seeds resampled) against FRC
SEED_SHARE_A = 0.8  # board A: 4 of 5 seeds


@dataclass(frozen=True)
class Criterion:
    """One pre-registered pass criterion: ``against`` (a plan comparator or control name), ``level`` (PER_SEED or
    RUN), the ``margin`` its lower bound must clear, and for PER_SEED how many of the plan's seeds must."""

    name: str
    against: str
    level: str
    margin: float
    required: int | None = None

    def payload(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Judged:
    """A criterion's verdict and what it rests on (a table row)."""

    criterion: str
    against: str
    level: str
    margin: float
    verdict: str
    evidence: str


def required_of(seeds: int, share: float) -> int:
    """How many of ``seeds`` a share requires (4 of 5 at 0.8; 2 of 2 at smoke's two seeds)."""
    return max(1, math.ceil(share * seeds - 1e-9))


def issue56(board: str, seeds: int, gate_threshold: float) -> tuple[Criterion, ...]:
    """Issue 56's criteria for ``board`` with ``seeds`` random seeds (module doc)."""
    out: list[Criterion] = []
    if board == "A":
        out += [Criterion("A: seeds non-inferior to FRC", FRC, PER_SEED, NON_INFERIORITY_MARGIN,
                          required_of(seeds, SEED_SHARE_A)),
                Criterion("A: a run non-inferior to FRC", FRC, RUN, RUN_MARGIN_A)]
    elif board == "B_offline":
        out.append(Criterion("B_offline: every seed beats the best baseline", SELECTION_BEST, PER_SEED,
                             float(gate_threshold), seeds))
    out += [Criterion("a run beats random search", RANDOM_CONTROL, RUN, 0.0),
            Criterion("a run beats its seed program", SEED_CONTROL, RUN, 0.0)]
    return tuple(out)


def from_payload(rows: Iterable[dict]) -> tuple[Criterion, ...]:
    """The criteria as a recorded plan holds them (its ``criteria`` list)."""
    return tuple(Criterion(str(r["name"]), str(r["against"]), str(r["level"]), float(r["margin"]),
                           None if r.get("required") is None else int(r["required"])) for r in rows)


def _side(lo: float, hi: float, margin: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    return MET if lo > margin else (NOT_MET if hi < margin else INCONCLUSIVE)


def judge_one(criterion: Criterion, per_seed: list[tuple[float, float]], run: tuple[float, float, bool] | None) -> Judged:
    """``per_seed``: each seed's (lo, hi) against the criterion's comparator; ``run``: (lo, hi, seed_level) of the
    ``a run`` row, or None."""
    c = criterion
    if c.level == PER_SEED:
        sides = [_side(lo, hi, c.margin) for lo, hi in per_seed]
        meets, misses = sides.count(MET), sides.count(NOT_MET)
        need = len(sides) if c.required is None else c.required
        verdict = MET if meets >= need else (NOT_MET if len(sides) - misses < need else INCONCLUSIVE)
        evidence = (f"{meets} of {len(sides)} seeds' lower bounds above {c.margin:+g} ({need} required); "
                    f"{misses} upper bound(s) below it")
    elif c.level == RUN:
        if run is None:
            return Judged(c.name, c.against, c.level, c.margin, INCONCLUSIVE, "no run row")
        lo, hi, seed_level = run
        verdict = _side(lo, hi, c.margin) if seed_level else INCONCLUSIVE
        evidence = f"a run's interval [{lo:+.3f}, {hi:+.3f}] against {c.margin:+g}" + (
            "" if seed_level else " (one seed: no seed level resampled)")
    else:
        raise ValueError(f"unknown criterion level {c.level!r}")
    return Judged(c.name, c.against, c.level, c.margin, verdict, evidence)


def judge(criteria: Iterable[Criterion], pools: dict[str, object]) -> list[Judged]:
    """One verdict per criterion from ``pools`` (comparator name -> ``seed_pool.SeedPool``; the plan's names, e.g.
    ``FRC``, ``SELECTION_BEST``, ``SEED_CONTROL``, ``RANDOM_CONTROL``). A criterion whose comparator has no pool is
    inconclusive and says so: a dropped comparison is never read as passing."""
    out = []
    for c in criteria:
        pool = pools.get(c.against)
        if pool is None:
            out.append(Judged(c.name, c.against, c.level, c.margin, INCONCLUSIVE, f"no test rows against {c.against}"))
            continue
        seeds = [(float(r.lo), float(r.hi)) for r in pool.per_seed.itertuples()]
        run = None if pool.run is None else (pool.run.lo, pool.run.hi, pool.run.seed_level)
        out.append(judge_one(c, seeds, run))
    return out
