"""The gate: a submission moves a board only when its gain over the board's best is resolved above a threshold.

The gain is the mean over tasks of the per-task mean of ``candidate - best`` on the same test items (the
board's overall averages tasks alike). Its 95% interval is a paired bootstrap that resamples items within
each task, with the draw of ``intervals.stratum_rng`` (the suite's one bootstrap), seeded by the ledger.
It passes only when the interval's lower end is above ``threshold``: a baseline resubmitted under another
name has gain 0 on every resample and never passes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ...stats.intervals import LEVEL, RESAMPLES, resample_counts, stratum_rng


@dataclass
class GateResult:
    """The gain's point and interval, the bar it had to clear, whether it did, and the bootstrap seed."""

    gain: float
    lo: float
    hi: float
    threshold: float
    passed: bool
    seed: int

    def as_dict(self) -> dict:
        return asdict(self)


def gate(candidate: pd.Series, best: pd.Series, strata: pd.Series, threshold: float, seed: int,
         resamples: int = RESAMPLES, level: float = LEVEL) -> GateResult:
    """Paired bootstrap of ``candidate - best`` over items stratified by ``strata`` (task); passes when lo > threshold.

    The three series are aligned on their index (one entry per test item); a missing or NaN score on either
    side is an error, not a silent drop (the comparison would no longer be paired).
    """
    frame = pd.DataFrame({"candidate": candidate, "best": best, "stratum": strata})
    if frame.empty:
        raise ValueError("gate: no test items")
    if frame[["candidate", "best"]].isna().any().any() or frame.stratum.isna().any():
        bad = frame.index[frame.isna().any(axis=1)].tolist()[:10]
        raise ValueError(f"gate: items {bad} lack a score or a task on one side; both must score the same items")
    diff_sums, point = np.zeros(resamples), 0.0
    groups = list(frame.groupby("stratum", sort=True))
    for key, group in groups:
        diff = (group.candidate - group.best).to_numpy(dtype=float)
        counts = resample_counts(stratum_rng(seed, ("gate", key), len(diff)), len(diff), resamples)
        diff_sums += counts @ diff / len(diff)
        point += diff.mean()
    draws = diff_sums / len(groups)
    gain = point / len(groups)
    alpha = (1 - level) / 2
    lo, hi = (float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha)))
    return GateResult(float(gain), lo, hi, float(threshold), bool(lo > threshold), int(seed))
