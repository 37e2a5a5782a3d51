"""The spread of a timing: a median with a distribution-free interval over repeats, and a verdict against a range.

Timings on a shared machine are noisy and skewed (a stall lengthens a run, nothing shortens it), so a table
reports the median over repeats with the order-statistic interval for it: for sorted repeats x(1) <= ... <=
x(n), [x(k), x(n+1-k)] contains the true median with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1), with no
assumption on the distribution. The largest k reaching ``LEVEL`` is used; with too few repeats for that (n <= 5)
the interval is [min, max] and its ``coverage`` says how little it means.

A ratio of two methods is paired: per repeat the two were timed in the same round (interleaved), their ratio
is taken, and the median and interval are over those per-repeat ratios, so drift shared by both cancels.

``verdict`` compares an interval with a claimed range by the rule every table uses (``intervals.against_range``,
bounds included): ``reproduced`` (inside), ``contradicted`` (wholly outside), else ``inconclusive`` (it
straddles a bound, or has less than ``LEVEL`` coverage).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .intervals import CONTRADICTED, REPRODUCED, against_range
from .intervals import INCONCLUSIVE_TIMING as INCONCLUSIVE

LEVEL = 0.95
__all__ = ["CONTRADICTED", "INCONCLUSIVE", "LEVEL", "REPRODUCED", "Spread", "median_interval", "paired_ratios",
           "verdict"]


@dataclass(frozen=True)
class Spread:
    """A median over repeats and its interval; ``coverage`` is the interval's exact confidence."""

    median: float
    lo: float
    hi: float
    coverage: float
    n: int


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values: Sequence[float], level: float = LEVEL) -> Spread:
    """The median of ``values`` and its order-statistic interval (module doc); NaN when empty."""
    xs = sorted(float(v) for v in values if not math.isnan(v))
    n = len(xs)
    if n == 0:
        return Spread(math.nan, math.nan, math.nan, 0.0, 0)
    median = (xs[(n - 1) // 2] + xs[n // 2]) / 2
    k, coverage = 1, 1 - 2 * _binom_cdf_half(n, 0)
    while k + 1 <= (n + 1) // 2:
        wider = 1 - 2 * _binom_cdf_half(n, k)  # coverage of [x(k+1), x(n-k)]
        if wider < level:
            break
        k, coverage = k + 1, wider
    return Spread(median, xs[k - 1], xs[n - k], coverage if n > 1 else 0.0, n)


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Per repeat, numerator[i] / denominator[i]: both timed in the same round (NaN where the latter is 0)."""
    if len(numerator) != len(denominator):
        raise ValueError(f"paired repeats must match: {len(numerator)} vs {len(denominator)}")
    return [a / b if b else math.nan for a, b in zip(numerator, denominator, strict=True)]


def verdict(spread: Spread, low: float, high: float, level: float = LEVEL) -> str:
    """``reproduced`` / ``contradicted`` / ``inconclusive`` for the claim "the value lies in [low, high]"."""
    if spread.n == 0 or spread.coverage < level:
        return INCONCLUSIVE
    return against_range(spread.lo, spread.hi, low, high, closed=True) or INCONCLUSIVE


def paper_hardware(comparison, samples, paper_model: str = "8b", paper_device: str = "cuda"):
    """The verdicts against the paper's H100 ranges kept only where the timings come from an 8B-shaped model on
    a GPU; anything else (a tiny model on a CPU) is ``not measurable here``: its ratios stay, its verdict goes
    to ``verdict_if_comparable`` (what the range would say, for the curious, and nothing more)."""
    from .intervals import NOT_MEASURABLE

    devices = samples.groupby("model").device.first().to_dict()
    comparable = [paper_model in str(m).lower() and str(devices.get(m, "")).startswith(paper_device)
                  for m in comparison.model]
    out = comparison.rename(columns={"verdict": "verdict_if_comparable"})
    out.insert(len(out.columns), "verdict", [v if ok else NOT_MEASURABLE for v, ok in
                                              zip(out.verdict_if_comparable, comparable, strict=True)])
    out["why"] = ["8B-shaped model on a GPU, as the paper's H100" if ok else
                  f"{m} on {devices.get(m, '?')}: the paper's ranges are Llama-3.1-8B on an H100"
                  for m, ok in zip(out.model, comparable, strict=True)]
    return out
