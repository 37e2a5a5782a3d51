"""The claims of Takeaways 1 and 2, each judged on the paired bootstrap's intervals.

A verdict is ``reproduced`` when the 95% interval supports the claim, ``contradicted`` when it excludes it,
``inconclusive at this sample size`` when it allows both (``leans``: whether its point estimate lies for or
against the claim, so a reader sees which way the open claim tilts; ``needed_per_task``: roughly the samples per
task that would resolve it), and ``not measurable here`` when the model without compression scores below
``MIN_MEASURABLE`` (then differences between methods are noise, not evidence). A claim over several cells
is contradicted by any cell and reproduced only when every cell reproduces it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..stats.intervals import (
    INCONCLUSIVE,
    NOT_MEASURABLE,
    Bootstrap,
    Interval,
    Verdict,
    combine,
    fmt,
    judge,
    paired_bootstrap,
)
from .analysis import (
    MIN_MEASURABLE,
    TIE_POINTS,
    cells_at,
    cells_of,
    drop_weights,
    no_press_scores,
    paper_numbers,
)

TIE_TOLERANCE = 2 * TIE_POINTS  # "within about 1 point", read generously
RELATIVE_BELOW = 0.5  # compared scores below half the paper's: a threshold in points does not carry over
COLUMNS = ["claim", "paper", "here", "verdict", "leans", "needed_per_task"]
LEANS = {"for": "for the claim", "against": "against the claim"}


def _frame(rows: list[dict[str, object]], columns: list[str] = COLUMNS) -> pd.DataFrame:
    """The verdict table; sample sizes as whole numbers (empty where there is none)."""
    return pd.DataFrame(rows, columns=columns).astype({"needed_per_task": "Int64"})


def _row(claim: str, paper: str, here: str, verdict: Verdict) -> dict[str, object]:
    return {"claim": claim, "paper": paper, "here": here, "verdict": verdict.verdict,
            "leans": LEANS.get(verdict.leans, "") if verdict.verdict == INCONCLUSIVE else "",
            "needed_per_task": verdict.needed if verdict.needed is not None else np.nan}


def _unmeasurable(samples: pd.DataFrame, boot: Bootstrap, claim: str) -> pd.DataFrame | None:
    """The single 'not measurable here' row when no compression itself fails RULER, else ``None``."""
    full = no_press_scores(samples, boot)
    best = max((e.point for e in full.values()), default=np.nan)
    if np.isnan(best) or best >= MIN_MEASURABLE:
        return None
    return _frame([{"claim": claim, "paper": "", "verdict": NOT_MEASURABLE, "leans": "", "needed_per_task": np.nan,
                    "here": f"no compression scores only {best:.1f}: the model cannot solve RULER"}])


def verdicts(samples: pd.DataFrame, methods: list[str], low: float = 0.80, high: float = 0.88) -> pd.DataFrame:
    """Takeaway 1: FRC best at r >= 0.75, ties at r <= 0.50, FRC degrades least from ``low`` to ``high``."""
    cells, boot = cells_of(samples), paired_bootstrap(samples)
    skip = _unmeasurable(samples, boot, "all claims of Takeaway 1")
    if skip is not None:
        return skip
    cells = cells[cells.method.isin(methods) & (cells.method != "no_press")]
    if "frc" not in set(cells.method):
        return _frame([_row("FRC vs baselines", "", "no FRC results", Verdict(NOT_MEASURABLE))])
    rows = [r for r in (_best_claim(boot, cells), _tie_claim(boot, cells), _degradation_claim(boot, cells, low, high))
            if r is not None]
    return _frame(rows)


def _groups(cells: pd.DataFrame):
    for key, g in cells.groupby(["model", "length", "ratio"]):
        yield key, dict(zip(g.method, g.cell, strict=True))


def _best_claim(boot: Bootstrap, cells: pd.DataFrame) -> dict[str, object] | None:
    """FRC above every other compressed method (paired difference > 0) in each cell with r >= 0.75."""
    per_cell = [combine(judge(boot.diff(by["frc"], c), low=0) for m, c in by.items() if m != "frc")
                for (_, _, ratio), by in _groups(cells) if ratio >= 0.75 and "frc" in by and len(by) > 1]
    if not per_cell:
        return None
    count = {v: sum(p.verdict == v for p in per_cell) for v in ("reproduced", "contradicted")}
    here = (f"FRC above every other method in {count['reproduced']} of {len(per_cell)} cells, "
            f"significantly below one in {count['contradicted']}, undecided in the rest")
    return _row("FRC is the best compressed method in every cell with r >= 0.75", "12 of 12 cells", here,
                combine(per_cell))


def _tie_claim(boot: Bootstrap, cells: pd.DataFrame) -> dict[str, object] | None:
    """Best minus worst method (by point) within +-TIE_TOLERANCE in each cell with r <= 0.50."""
    spreads = []
    for (model, length, ratio), by in _groups(cells):
        if ratio <= 0.50 and len(by) > 1:
            point = {m: boot.mean(c).point for m, c in by.items()}
            top, bottom = max(point, key=point.get), min(point, key=point.get)
            spreads.append((f"{Path(model).name} {length} r={ratio}", boot.diff(by[top], by[bottom])))
    if not spreads:
        return None
    where, widest = max(spreads, key=lambda s: s[1].point)
    verdict = combine(judge(s, low=-TIE_TOLERANCE, high=TIE_TOLERANCE) for _, s in spreads)
    return _row("At r <= 0.50 all methods are within about 1 point (ties)", "spread <= ~1 point",
                f"largest spread {fmt(widest)} points ({where}); tie = within {TIE_TOLERANCE:g}", verdict)


def _degradation_claim(boot: Bootstrap, cells: pd.DataFrame, low: float, high: float) -> dict[str, object] | None:
    """FRC's mean drop from ``low`` to ``high`` below every other method's (paired difference < 0)."""
    frc = drop_weights(cells, "frc", low, high)
    others = {m: w for m in sorted(set(cells.method) - {"frc"}) if (w := drop_weights(cells, m, low, high))}
    if not frc or not others:
        return None
    diffs = {m: boot.contrast(_minus(frc, w)) for m, w in others.items()}
    here = f"FRC drop {fmt(boot.contrast(frc))}; FRC minus " + "; ".join(f"{m} {fmt(d)}" for m, d in diffs.items())
    return _row(f"From r = {low} to {high} FRC degrades least", "FRC -7 vs ChunkKV -14, ExpectedAttention -19 "
                "(0.80 to 0.88)", here, combine(judge(d, high=0) for d in diffs.values()))


def _minus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: a.get(k, 0.0) - b.get(k, 0.0) for k in a.keys() | b.keys()}


def decomposition_verdicts(samples: pd.DataFrame, scorer_ratio: float = 0.88,
                           ablation_ratio: float = 0.83) -> pd.DataFrame:
    """Takeaway 2 on one model and length: the scorer carries FRC's gain; density matters, maxhead barely.

    The first two claims have thresholds in points (> 10, within 5) set at the paper's level (FRC 84.6). They
    are also judged on a scale that carries over to a model scoring far lower, the ratio of the two scores
    against the ratio the threshold means at the paper's numbers (``relative``); the ratio decides when the
    compared scores here are below half the paper's (``decides``), else the points do. ``verdict`` is the
    deciding one; both stay in the table.
    """
    cells, boot = cells_of(samples), paired_bootstrap(samples)
    s, a = cells_at(cells, scorer_ratio), cells_at(cells, ablation_ratio)
    full = no_press_scores(samples, boot)
    measurable = bool(full) and max(e.point for e in full.values()) >= MIN_MEASURABLE
    paper = paper_numbers("decomposition").set_index("method").value

    def claim(text: str, paper_text: str, est: Interval, low: float = -np.inf, high: float = np.inf,
              here: str = "") -> dict[str, object]:
        verdict = judge(est, low, high) if measurable else Verdict(NOT_MEASURABLE)
        return _row(text, paper_text, f"{here}difference {fmt(est)}", verdict) | {"decides": "points"}

    def scaled(text: str, paper_text: str, a_: str, b_: str, low: float = -np.inf, high: float = np.inf):
        """A claim in points at the paper's level, beside the same claim as a ratio a / b."""
        points = boot.diff(s[a_], s[b_])
        ref = float(paper[b_])
        ratio, r_low, r_high = boot.ratio(s[a_], s[b_]), (ref + low) / ref, (ref + high) / ref
        by_points = judge(points, low, high) if measurable else Verdict(NOT_MEASURABLE)
        by_ratio = judge(ratio, r_low, r_high) if measurable else Verdict(NOT_MEASURABLE)
        level = max(boot.mean(s[a_]).point, boot.mean(s[b_]).point) / max(float(paper[a_]), ref)
        decides = "relative" if level < RELATIVE_BELOW else "points"
        bounds = " and ".join(f"{op} {v:.3f}" for op, v in ((">", r_low), ("<", r_high)) if np.isfinite(v))
        here = (f"difference {fmt(points)} points ({by_points.verdict}); ratio {fmt(ratio, 2)} vs {bounds} "
                f"({by_ratio.verdict}); scores here at {level:.0%} of the paper's level: the {decides} scale decides")
        row = _row(text, paper_text, here, by_ratio if decides == "relative" else by_points)
        return row | {"verdict_points": by_points.verdict, "verdict_relative": by_ratio.verdict, "decides": decides}

    d_density = boot.contrast({a["frc_no_density"]: 1, a["frc"]: -1})
    d_maxhead = boot.contrast({a["frc_no_maxhead"]: 1, a["frc"]: -1})
    rows = [
        scaled("the FRC scorer beats the V1 scorer by a wide margin (> 10 points)", "84.6 vs 17.4",
               "frc", "v1_tokenwise", low=10),
        scaled("chunking adds little once the scorer is FRC (within 5 points)", "84.6 vs 84.7 tokenwise",
               "frc", "frc_tokenwise", low=-5, high=5),
        claim("density matters more than maxhead (dropping it costs more)", "-3.20 vs -0.22",
              boot.diff(a["frc_no_density"], a["frc_no_maxhead"]), high=0,
              here=f"-density {fmt(d_density)}, -maxhead {fmt(d_maxhead)}; "),
        claim(f"full FRC beats KVPress ChunkKV at r = {ablation_ratio}", "91.23 vs 85.10",
              boot.diff(a["frc"], a["chunkkv"]), low=0),
    ]
    table = _frame(rows, [*COLUMNS, "verdict_points", "verdict_relative", "decides"])
    return table.fillna({"verdict_points": "", "verdict_relative": "", "decides": "points"})


def mildest_loss(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (model, length): no compression minus the best compressed method at the mildest ratio, paired.

    Small models lose much even there; the paper's 8B models stay within about a point.
    """
    cells, boot = cells_of(samples), paired_bootstrap(samples)
    rows = []
    for (model, length), g in cells.groupby(["model", "length"]):
        compressed = g[g.method != "no_press"]
        if compressed.empty or "no_press" not in set(g.method):
            continue
        ratio = float(compressed.ratio.min())
        by = cells_at(g, ratio)
        best = max((m for m in by if m != "no_press"), key=lambda m: boot.mean(by[m]).point)
        loss = boot.diff(by["no_press"], by[best])
        rows.append({"model": Path(model).name, "length": length, "ratio": ratio, "best_method": best,
                     "loss": loss.point, "lo": loss.lo, "hi": loss.hi, "loss [95% CI]": fmt(loss)})
    return pd.DataFrame(rows)
