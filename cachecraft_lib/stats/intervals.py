"""THE uncertainty of every comparison: a paired bootstrap over samples, and three-valued verdicts.

``paired_bootstrap`` resamples sample indices within each stratum (model, length, task) and applies the
same draw to every unit (grid cell) of that stratum, so a difference between two methods is computed on the
same resampled samples: what two methods share (an easy or impossible sample) cancels out. Each unit's
statistic is the RULER aggregate, the unweighted mean over its tasks of the task's mean score. The draw of a
stratum depends only on the seed, the stratum and its size, so two calls on overlapping cells agree; a model
enters the stratum's key by its name (``Path(model).name``), never by the folder it lies in, so two checkouts
in different folders draw the same resamples and write byte-identical tables.

``judge`` turns an interval and a claim ("the value lies in (low, high)") into ``reproduced`` (the interval
lies inside the claim), ``contradicted`` (it lies outside) or ``inconclusive at this sample size`` (it
straddles a boundary),
with the samples per task that would resolve it with probability ``POWER`` (80%) if the observed difference
were the true one: the standard error (half-width / 1.96) scales as 1/sqrt(n), and the point must clear the
claim's boundary by (1.96 + 0.84) standard errors. A claim over several comparisons that must all hold
(``combine``) is settled by the comparisons that lean against it (the first one resolved contradicts it), so its
estimate is the smallest over those; only when every comparison leans for it is it the largest.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from statistics import NormalDist

import numpy as np
import pandas as pd

RESAMPLES = 2000
SEED = 20240501
LEVEL = 0.95
POWER = 0.80  # the chance the quoted sample size resolves a verdict, if the observed difference is the true one
STRATA = ("model", "length", "task")
REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive at this sample size"
NOT_MEASURABLE = "not measurable here"
INCONCLUSIVE_TIMING = "inconclusive"  # a timing interval over repeats: the tables of notebook 06 use this word
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE)
METHOD_NOTE = "95% paired bootstrap over samples (resampled within task, the same draw for every method; 2,000 resamples)"


@dataclass(frozen=True)
class Interval:
    """A point estimate and its percentile interval; ``lo``/``hi`` are NaN when a task has a single sample."""

    point: float
    lo: float
    hi: float
    n: int  # samples per task (the smallest task involved)

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))

    def includes(self, value: float) -> bool:
        """True when ``value`` is inside the interval, or when there is no interval to exclude it."""
        return not self.defined or self.lo <= value <= self.hi

    def __str__(self) -> str:
        return fmt(self)


@dataclass(frozen=True)
class Bootstrap:
    """Resampled aggregates of every unit (``draws[b, u]``) beside their point estimates."""

    units: tuple[str, ...]
    point: np.ndarray  # (units,)
    draws: np.ndarray  # (resamples, units)
    n: np.ndarray  # (units,) smallest samples per task of each unit
    level: float = LEVEL

    def contrast(self, weights: Mapping[str, float]) -> Interval:
        """Any linear combination of units, e.g. ``{a: 1, b: -1}`` for a - b, with its interval."""
        cols = [self.units.index(u) for u in weights]
        w = np.array(list(weights.values()), dtype=float)
        values = self.draws[:, cols] @ w
        n = int(self.n[cols].min())
        tail = (1 - self.level) / 2 * 100
        lo, hi = np.percentile(values, [tail, 100 - tail]) if n >= 2 else (np.nan, np.nan)
        return Interval(float(self.point[cols] @ w), float(lo), float(hi), n)

    def ratio(self, a: str, b: str) -> Interval:
        """``a / b`` with its percentile interval over the same resamples (no interval where ``b`` can be 0)."""
        i, j = self.units.index(a), self.units.index(b)
        n = int(min(self.n[i], self.n[j]))
        point = float(self.point[i] / self.point[j]) if self.point[j] > 0 else math.nan
        den = self.draws[:, j]
        if n < 2 or (den <= 0).any():
            return Interval(point, math.nan, math.nan, n)
        tail = (1 - self.level) / 2 * 100
        lo, hi = np.percentile(self.draws[:, i] / den, [tail, 100 - tail])
        return Interval(point, float(lo), float(hi), n)

    def mean(self, unit: str) -> Interval:
        """The aggregate of one unit."""
        return self.contrast({unit: 1.0})

    def diff(self, a: str, b: str) -> Interval:
        """The paired difference a - b (exactly 0 for a unit with itself)."""
        return self.contrast({a: 1.0, b: -1.0} if a != b else {a: 0.0})

    def frame(self) -> pd.DataFrame:
        """Every unit's aggregate: unit, point, lo, hi, n."""
        rows = [{"unit": u, **vars(self.mean(u))} for u in self.units]
        return pd.DataFrame(rows, columns=["unit", "point", "lo", "hi", "n"])


def stratum_rng(seed: int, key: Iterable[object], n: int) -> np.random.Generator:
    """A generator for one stratum: the same seed, stratum and size always give the same draw.

    The key must not name anything that depends on the checkout (a folder): ``paired_bootstrap`` passes a
    model by its name (``stable_key``).
    """
    tag = "|".join(str(k) for k in key) + f"|n={n}"
    return np.random.default_rng([seed, zlib.crc32(tag.encode())])


def stable_key(key: object, strata: tuple[str, ...]) -> tuple[object, ...]:
    """A stratum's key with its ``model`` by name (the folder's last part), so the draw is folder-independent."""
    values = key if isinstance(key, tuple) else (key,)
    return tuple(PurePath(str(v)).name if s == "model" else v for s, v in zip(strata, values, strict=True))


def resample_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """How often each of ``n`` samples is drawn in each resample of ``n`` draws with replacement."""
    idx = rng.integers(0, n, size=(resamples, n))
    flat = (np.arange(resamples)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n)


def paired_bootstrap(samples: pd.DataFrame, unit: str = "cell", strata: tuple[str, ...] = STRATA,
                     resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> Bootstrap:
    """The one bootstrap of the suite: per-sample ``score`` resampled within ``strata``, paired across units.

    ``samples`` has one row per (unit, sample): the ``strata`` columns, ``index`` (the sample's id within its
    stratum, shared by every unit that answered it) and ``score``. Every unit of a stratum must hold the same
    samples, or the comparison would not be paired.
    """
    missing = {unit, "index", "score", *strata} - set(samples.columns)
    if missing:
        raise ValueError(f"paired_bootstrap: missing columns {sorted(missing)} (per-sample table expected)")
    if samples.empty:
        raise ValueError("paired_bootstrap: no samples")
    units = tuple(sorted(samples[unit].astype(str).unique()))
    col = {u: i for i, u in enumerate(units)}
    sums, point = np.zeros((resamples, len(units))), np.zeros(len(units))
    tasks, n_min = np.zeros(len(units)), np.full(len(units), np.iinfo(np.int64).max)
    for key, group in samples.groupby(list(strata), sort=True):
        table = _paired_table(group, unit, key)
        cols = [col[u] for u in table.columns]
        scores = table.to_numpy(dtype=float)
        counts = resample_counts(stratum_rng(seed, stable_key(key, strata), len(table)), len(table), resamples)
        sums[:, cols] += counts @ scores / len(table)
        point[cols] += scores.mean(axis=0)
        tasks[cols] += 1
        n_min[cols] = np.minimum(n_min[cols], len(table))
    return Bootstrap(units, point / tasks, sums / tasks, n_min, level)


def _paired_table(group: pd.DataFrame, unit: str, key: object) -> pd.DataFrame:
    """Samples x units of one stratum; an error when a unit lacks a sample another unit has."""
    if group.duplicated([unit, "index"]).any():
        raise ValueError(f"paired_bootstrap: a unit scores the same sample twice in stratum {key}")
    table = group.assign(**{unit: group[unit].astype(str)}).pivot(index="index", columns=unit, values="score")
    if table.isna().any().any():
        short = sorted(table.columns[table.isna().any()])
        raise ValueError(f"paired_bootstrap: {short} lack samples others have in stratum {key}: cannot pair")
    return table


@dataclass(frozen=True)
class Verdict:
    """A three-valued verdict; ``needed``: the samples per task that would resolve an inconclusive one with
    ``POWER``; ``leans``: ``"for"`` when the point estimate lies inside the claim, ``"against"`` when outside."""

    verdict: str
    needed: int | None = None
    leans: str | None = None

    def __str__(self) -> str:
        if self.verdict != INCONCLUSIVE:
            return self.verdict
        size = f"~{self.needed} samples per task would resolve it ({POWER:.0%} power)" if self.needed else \
            "no sample size estimate"
        return f"{INCONCLUSIVE} ({size})"


def judge(est: Interval, low: float = -math.inf, high: float = math.inf) -> Verdict:
    """Does the interval support the claim ``low < value < high``, exclude it, or allow both?

    An interval that touches a boundary allows both, like a difference interval that includes 0 shares a rank:
    ``[0, 0]`` (two methods scoring alike on every sample) neither supports nor contradicts "a beats b".
    """
    decided = against_range(est.lo, est.hi, low, high) if est.defined else None
    if decided:
        return Verdict(decided)
    leans = "for" if low < est.point < high else "against"
    return Verdict(INCONCLUSIVE, samples_to_resolve(est, low, high), leans)


def against_range(lo: float, hi: float, low: float, high: float, closed: bool = False) -> str | None:
    """The one three-valued rule: ``REPRODUCED`` when [lo, hi] lies inside the claimed range, ``CONTRADICTED``
    when wholly outside it, None when it allows both. ``closed``: an interval may touch the range's bounds
    (a claimed range of ratios); open (default): touching a bound allows both (a claimed difference vs 0)."""
    inside = (low <= lo and hi <= high) if closed else (low < lo and hi < high)
    if inside:
        return REPRODUCED
    if hi < low or lo > high:
        return CONTRADICTED
    return None


def z_two_sided(level: float = LEVEL) -> float:
    """The normal quantile of a two-sided ``level`` interval (1.96 at 95%): half-width / it = standard error."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def z_for_power(level: float = LEVEL, power: float = POWER) -> float:
    """Standard errors by which a true difference must clear a boundary to be resolved with ``power`` (2.80)."""
    return z_two_sided(level) + NormalDist().inv_cdf(power)


def units_for_power(n: int, half_width: float, distance: float, level: float = LEVEL, power: float = POWER) -> int:
    """Units (samples per task, test items) at which a ``level`` interval of ``half_width`` at ``n`` units,
    shrinking as 1/sqrt(n), excludes a boundary ``distance`` from the point with probability ``power``."""
    se = half_width / z_two_sided(level)
    return math.ceil(n * (z_for_power(level, power) * se / distance) ** 2)


def samples_to_resolve(est: Interval, low: float, high: float, power: float = POWER) -> int | None:
    """Samples per task at which the claim resolves with ``power`` if the point is the true value.

    Inside the claim both finite boundaries must clear; outside, the one between the point and the claim.
    ``None`` when there is no interval to scale or the point sits on a boundary.
    """
    if not est.defined:
        return None
    inside = low < est.point < high
    bounds = [b for b in (low, high) if math.isfinite(b)]
    if not inside:
        bounds = [low] if est.point <= low else [high]
    needed = []
    for b in bounds:
        distance = abs(est.point - b)
        width = max(est.point - est.lo if b < est.point else est.hi - est.point, 0.0)
        if distance == 0:
            return None
        needed.append(units_for_power(est.n, width, distance, power=power))
    return max(max(needed), est.n + 1)


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """A claim that holds only if every comparison holds: contradicted by any, reproduced only when all are.

    Undecided, it is settled by the comparisons that lean against it: the first of them to resolve contradicts
    it, so ``needed`` is the smallest estimate among them. Only when every undecided comparison leans for the
    claim must all of them resolve, and ``needed`` is the largest.
    """
    verdicts = list(verdicts)
    if any(v.verdict == CONTRADICTED for v in verdicts):
        return Verdict(CONTRADICTED)
    if verdicts and all(v.verdict == REPRODUCED for v in verdicts):
        return Verdict(REPRODUCED)
    open_ = [v for v in verdicts if v.verdict == INCONCLUSIVE]
    against = [v for v in open_ if v.leans == "against"]
    if against:
        sizes = [v.needed for v in against if v.needed is not None]
        return Verdict(INCONCLUSIVE, min(sizes) if sizes else None, "against")
    needed = [v.needed for v in open_]
    return Verdict(INCONCLUSIVE, None if not needed or None in needed else max(needed), "for" if open_ else None)


def over_rows(frame: pd.DataFrame, statistic, resamples: int = RESAMPLES, seed: int = SEED,
              level: float = LEVEL, key: str = "rows") -> Interval:
    """A statistic of a whole table (e.g. a rank correlation over programs) with a percentile bootstrap interval,
    resampling its rows with replacement (the same seeded draw, ``stratum_rng``); resamples where the statistic is
    undefined (NaN) are left out; with fewer than 3 rows, or no statistic on the whole table, there is no interval."""
    n = len(frame)
    point = float(statistic(frame)) if n else math.nan
    if n < 3 or math.isnan(point):
        return Interval(point, math.nan, math.nan, n)
    rng = stratum_rng(seed, (key,), n)
    values = np.array([statistic(frame.iloc[rng.integers(0, n, n)]) for _ in range(resamples)], dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < resamples / 2:
        return Interval(point, math.nan, math.nan, n)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return Interval(point, float(lo), float(hi), n)


def rank_range(diffs: Mapping[str, Interval]) -> tuple[int, int, list[str]]:
    """A rank as a range, from the paired differences ``this - other`` to every other entry (higher is better).

    Entries whose difference interval lies below 0 rank ahead, above 0 behind; the rest (the interval
    includes 0, or there is none) share the rank: (best, worst, those shared with). The one rule for
    notebook 03's FRC rank and the arena leaderboard.
    """
    ahead = [m for m, d in diffs.items() if d.defined and d.hi < 0]
    behind = [m for m, d in diffs.items() if d.defined and d.lo > 0]
    shared = sorted(set(diffs) - set(ahead) - set(behind))
    return 1 + len(ahead), 1 + len(ahead) + len(shared), shared


def fmt(est: Interval, digits: int = 1) -> str:
    """``"12.3 [8.1, 16.0]"``; without an interval (one sample per task) says so."""
    if not est.defined:
        return f"{est.point:.{digits}f} [no interval at n = {est.n}]"
    return f"{est.point:.{digits}f} [{est.lo:.{digits}f}, {est.hi:.{digits}f}]"
