"""Budgets for the embedded boards, measured: the best baseline should keep about 0.4-0.9 of the full cache.

Why: the reference arena's budgets (A: keep 2/5/10%, B: 10/25/50%) leave every method at the floor on the embedded model
(query-aware SnapKV keeps 0.40 of the full-cache score at 50% kept, 0.16 at 25%, 0.04 at 10%), so nothing could
be told apart. ``calibrate_board`` runs the board's baselines on its dev items at candidate budgets and keeps
the budgets where the best baseline's normalised accuracy lies in the target band; ``items_to_resolve`` says
how many test units the paired differences' variance asks for to resolve a gain of 0.02.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import pandas as pd

from ..methods.registry import NO_PRESS
from .boards.boards import Board
from .scoring import score

TARGET = (0.4, 0.9)
CANDIDATES = (0.95, 0.9, 0.8, 0.75, 0.6, 0.5, 0.4, 0.3, 0.25)


class CalibrationFailed(ValueError):
    """No candidate budget puts the best baseline in the band; the table says where it landed."""


def choose_budgets(measure: Callable[[float], float], candidates: Sequence[float] = CANDIDATES,
                   target: tuple[float, float] = TARGET, count: int = 3) -> tuple[tuple[float, ...], pd.DataFrame]:
    """Up to ``count`` budgets (fractions kept) whose best-baseline accuracy ``measure(keep)`` is in ``target``:
    the largest and smallest such budgets and those between them spread evenly, so the board spans the band."""
    table = pd.DataFrame({"keep": list(candidates), "best_accuracy": [float(measure(k)) for k in candidates]})
    table["in_band"] = table.best_accuracy.between(*target)
    inside = sorted(table.loc[table.in_band, "keep"], reverse=True)
    if not inside:
        raise CalibrationFailed(f"no budget puts the best baseline within {target} of the full cache:\n"
                                f"{table.to_string(index=False)}\nwiden the candidates (--candidates) or the band")
    if len(inside) <= count:
        return tuple(inside), table
    picks = [inside[round(i * (len(inside) - 1) / (count - 1))] for i in range(count)] if count > 1 else [inside[0]]
    return tuple(dict.fromkeys(picks)), table


def best_accuracy_by_budget(rows: pd.DataFrame, board: Board) -> pd.Series:
    """Per budget: the highest normalised accuracy among the board's baselines (full and random excluded)."""
    per_budget = {}
    for budget, part in rows[rows.method != NO_PRESS].groupby("budget"):
        sub = pd.concat([part, rows[rows.method == NO_PRESS]])
        u = score.unit_values(sub, replace(board, budgets=(float(budget),)))
        acc = u[~u.method.isin([NO_PRESS, "random"])].groupby(["method", "task"]).accuracy.mean().groupby("method").mean()
        per_budget[float(budget)] = float(acc.max()) if len(acc) else math.nan
    return pd.Series(per_budget, name="best_accuracy")


def calibrate_board(run: Callable[[Board], pd.DataFrame], board: Board, candidates: Sequence[float] = CANDIDATES,
                    target: tuple[float, float] = TARGET, count: int = 3) -> tuple[tuple[float, ...], pd.DataFrame]:
    """Measure the board's baselines at every candidate budget once (``run`` evaluates a board on its dev items)
    and choose the budgets."""
    rows = run(replace(board, budgets=tuple(candidates)))
    measured = best_accuracy_by_budget(rows, board)
    return choose_budgets(lambda k: measured[float(k)], candidates, target, count)


def items_to_resolve(differences: pd.Series, gain: float = 0.02, level: float = 0.95) -> int:
    """Units (in all) at which a 95% interval on the mean paired difference has half-width ``gain``:
    ``n = (z * sd / gain)^2``, with ``sd`` the standard deviation of the per-unit differences."""
    from statistics import NormalDist

    sd = float(differences.std(ddof=1))
    if not math.isfinite(sd) or sd == 0:
        return len(differences)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return math.ceil((z * sd / gain) ** 2)


def resolvable_gain(differences: pd.Series, units: int, level: float = 0.95) -> float:
    """The gain a test split of ``units`` units resolves (the interval's half-width), from the same variance."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    return z * float(differences.std(ddof=1)) / math.sqrt(units)


def best_share_intervals(rows: pd.DataFrame, board: Board, seed: int = 0) -> pd.DataFrame:
    """Per budget (cap): the best baseline's share of the full cache's score (normalised accuracy) with its 95%
    bootstrap interval over contexts (stratified by task); full and random are not candidates."""
    from ..stats.intervals import paired_bootstrap

    out = []
    for budget, part in rows[rows.method != NO_PRESS].groupby("budget"):
        sub = pd.concat([part, rows[rows.method == NO_PRESS]])
        units = score.unit_values(sub, replace(board, budgets=(float(budget),)))
        units = units[~units.method.isin([NO_PRESS, "random"])]
        acc = units.groupby(["method", "task"]).accuracy.mean().groupby("method").mean()
        best = str(acc.idxmax())
        samples = units.rename(columns={"accuracy": "score", "context_id": "index"})[["method", "task", "index",
                                                                                     "score"]]
        ci = paired_bootstrap(samples, unit="method", strata=("task",), seed=seed).frame().set_index("unit")
        out.append({"budget": float(budget), "method": best, "share": float(acc[best]),
                    "lo": float(ci.loc[best, "lo"]), "hi": float(ci.loc[best, "hi"]),
                    "contexts": int(units[units.method == best].context_id.nunique())})
    return pd.DataFrame(out).sort_values("budget", ascending=False).reset_index(drop=True)
