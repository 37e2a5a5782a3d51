"""A board's score: accuracy normalised to the full cache on the same items, efficiency against full-cache
runs, one overall number per method, and eligibility.

Per (task, budget): ``a = mean score of the method / mean score of the full cache`` over the same items, at
most ``accuracy_cap``; tasks where the full cache scores below ``full_cache_floor`` (RULER's 0-100) are
excluded and listed (normalising by a near-zero score measures noise). Accuracy = the mean of ``a`` over
tasks and budgets. Efficiency, averaged over budgets:

- memory ``M = 1 - kept entries / full entries`` (logical: what the method evicted; ``memory_basis: physical``
  counts what the cache holds, where key-masking presses keep everything; both are reported), credited at most
  at the budget's ``1 - budget`` (``_at_most_budget``: keeping fewer than the budget earns nothing, so the
  figure carries no bit a method chose);
- speed ``S = 1 - entries read per decoded token / full``, likewise at most the budget's;
- overhead ``O = compression FLOPs / prefill FLOPs``, at most 1; on a board with an allowance (B_offline) only
  the part beyond the allowance counts, ``min(1, max(0, O - allowance))``.

On decode-time boards (C) the rows also carry the generated length: ``G = min(1, tokens the full cache
generated / tokens the method generated)`` on the same item (a method that makes the model ramble costs
decode time and memory the cap does not show), and ``generated = 1 - G`` is charged.

``overall = w_acc * Acc + w_mem * M + w_speed * S - w_overhead * O - w_G * (1 - G)`` with the board's weights. Every term is a
mean of per-unit values (a unit is a context: its questions are averaged, so a B context is resampled whole),
so the gate's paired bootstrap over units and the leaderboard's number are the same statistic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...methods.registry import NO_PRESS
from ...stats.intervals import paired_bootstrap
from ..boards.boards import Board

TERMS = ("accuracy", "memory", "memory_physical", "speed", "overhead", "generated")


def excluded_tasks(rows: pd.DataFrame, board: Board) -> list[str]:
    """Tasks where the full cache's mean score is below the board's floor."""
    full = rows[rows.method == NO_PRESS].groupby("task")["score"].mean()
    return sorted(full[full < board.full_cache_floor].index)


def unit_values(rows: pd.DataFrame, board: Board) -> pd.DataFrame:
    """One row per (method, context): the score's terms and ``overall``; excluded tasks dropped."""
    if NO_PRESS not in set(rows.method):
        raise ValueError("unit_values: the full cache's rows are missing; every score is normalised to them")
    drop = set(excluded_tasks(rows, board))
    rows = rows[~rows.task.isin(drop)].copy()
    if rows.empty:
        raise ValueError(f"board {board.name}: every task is excluded (the full cache scores below "
                         f"{board.full_cache_floor:g} on all of them); nothing to score")
    full_mean = rows[rows.method == NO_PRESS].groupby("task")["score"].mean()
    rows["norm"] = rows.score / rows.task.map(full_mean)
    cell = rows.groupby(["method", "budget", "task"])["norm"].transform("mean")
    rows["accuracy"] = rows.norm * np.where(cell > board.accuracy_cap, board.accuracy_cap / cell.clip(lower=1e-12), 1)
    rows["memory_logical"] = _at_most_budget(1 - rows.logical_entries / rows.full_entries, rows, board)
    rows["memory_physical"] = _at_most_budget(1 - rows.physical_entries / rows.full_entries, rows, board)
    rows["memory"] = rows["memory_physical" if board.memory_basis == "physical" else "memory_logical"]
    rows["speed"] = _at_most_budget(1 - rows.read_entries / rows.full_read_entries, rows, board,
                                    scale=rows.full_entries / rows.full_read_entries)
    ratio = rows.overhead_flops / rows.prefill_flops
    allowance = board.overhead_allowance or 0.0
    rows["overhead_ratio"] = ratio
    rows["overhead"] = (ratio - allowance).clip(lower=0, upper=1)
    rows["generated"] = _generated_term(rows)
    per_unit = rows.groupby(["method", "context_id", "task"], sort=False)[
        ["accuracy", "memory", "memory_physical", "speed", "overhead", "overhead_ratio", "generated"]
    ].mean().reset_index()
    w = board.weights
    per_unit["overall"] = (w["accuracy"] * per_unit.accuracy + w["memory"] * per_unit.memory
                           + w["speed"] * per_unit.speed - w["overhead"] * per_unit.overhead
                           - w.get("generated_length", 0.0) * per_unit.generated)
    per_unit.attrs["excluded_tasks"] = sorted(drop)
    return per_unit


def _at_most_budget(term: pd.Series, rows: pd.DataFrame, board: Board, scale: pd.Series | float = 1.0) -> pd.Series:
    """A memory or speed term credited at most at the budget's own value, ``(1 - budget) * scale`` (prefill
    boards): a method that keeps fewer entries than its budget earns nothing for it, so these public figures are
    a function of the public budget and the items' sizes and carry no bit a method chose about the test items
    (keeping 1 to ``budget`` entries per layer would otherwise write ~20 bits into an entry's aggregates;
    arena/README.md). A method that keeps more (a key-masking press, physically) is charged what it keeps.
    Board C's caps bound the peak cache, not a prefill's kept share: its terms stay as measured."""
    if board.decode_time or "budget" not in rows:
        return term
    upper = (1 - rows.budget.astype(float)) * scale
    return term.where(term < upper - 1e-9, upper)  # at or above the budget's value (rounding included): exactly it


def _generated_term(rows: pd.DataFrame) -> pd.Series:
    """``1 - G`` per row, ``G = min(1, full's generated tokens / the method's)`` on the same item; 0 where the rows
    carry no generated length (prefill boards)."""
    if "generated_tokens" not in rows or rows.generated_tokens.isna().all():
        return pd.Series(0.0, index=rows.index)
    full = rows[rows.method == NO_PRESS].set_index("item").generated_tokens
    g = (rows.item.map(full) / rows.generated_tokens.clip(lower=1)).clip(upper=1.0)
    return (1.0 - g).fillna(0.0)


def method_scores(units: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per method: each term (mean over tasks of the task means), ``overall`` with its 95% interval."""
    terms = ["accuracy", "memory", "memory_physical", "speed", "overhead", "overhead_ratio", "generated", "overall"]
    by_task = units.groupby(["method", "task"])[terms].mean()
    table = by_task.groupby("method").mean()
    boot = paired_bootstrap(_samples(units, "overall"), unit="method", strata=("task",), seed=seed)
    ci = boot.frame().set_index("unit")
    table["lo"], table["hi"] = ci.lo.reindex(table.index), ci.hi.reindex(table.index)
    table["units_per_task"] = units.groupby(["method", "task"]).size().groupby("method").min()
    return table.sort_values("overall", ascending=False)


def _samples(units: pd.DataFrame, column: str) -> pd.DataFrame:
    return units.rename(columns={column: "score", "context_id": "index"})[["method", "task", "index", "score"]]


def paired_gain(units: pd.DataFrame, a: str, b: str, seed: int = 0):
    """``overall(a) - overall(b)`` on the same units with its paired 95% interval (``intervals.Interval``)."""
    sub = units[units.method.isin([a, b])]
    return paired_bootstrap(_samples(sub, "overall"), unit="method", strata=("task",), seed=seed).diff(a, b)


def best_baseline(scores: pd.DataFrame, exclude: tuple[str, ...] = (NO_PRESS, "random")) -> str:
    """The baseline with the highest overall score (the full cache and random eviction are references)."""
    candidates = scores.drop(index=[m for m in exclude if m in scores.index])
    if candidates.empty:
        raise ValueError("no baseline besides the full cache and random eviction to compare with")
    return str(candidates.overall.idxmax())


def eligible(row: pd.Series, board: Board, reference: pd.Series | None = None) -> tuple[bool, str]:
    """Whether a method's scores meet the board's limits, and why not.

    ``absolute``: accuracy >= limit and memory + speed >= limit (the reference arena's 0.6 and 0.15). ``relative``: the same
    as fractions of ``reference`` (the best baseline's row): the embedded model's baselines sit far below the
    post's absolute limits at any budget that leaves something to gain.
    """
    limits = board.limits
    acc_min, eff_min = limits.accuracy, limits.efficiency
    if limits.mode == "relative":
        if reference is None:
            raise ValueError("relative limits need the best baseline's scores")
        acc_min *= float(reference.accuracy)
        eff_min *= float(reference.memory + reference.speed)
    reasons = []
    if row.accuracy < acc_min:
        reasons.append(f"accuracy {row.accuracy:.3f} < {acc_min:.3f}")
    if row.memory + row.speed < eff_min - 1e-12:
        reasons.append(f"memory + speed {row.memory + row.speed:.3f} < {eff_min:.3f}")
    return not reasons, "; ".join(reasons) or "meets the limits"


def dev_report(base: pd.DataFrame, rows: pd.DataFrame, board: Board, name: str) -> dict:
    """``arena dev``'s report of method ``name`` (its ``rows``) beside the baselines' dev rows ``base`` (which hold
    the full cache's): scores with intervals, the best baseline, the paired gain over it, eligibility. The search's
    board fitness (``search.board_fitness``) calls this same function, so its fitness is the arena's dev score."""
    rows = pd.concat([base, rows[rows.method != NO_PRESS]], ignore_index=True)
    units = unit_values(rows, board)
    scores = method_scores(units)
    best = best_baseline(scores.drop(index=[name]))
    ok, why = eligible(scores.loc[name], board, scores.loc[best])
    return {"board": board.name, "scores": scores, "units": units, "best_baseline": best,
            "gain": paired_gain(units, name, best), "eligible": ok, "eligibility": why,
            "excluded_tasks": units.attrs["excluded_tasks"]}
