"""The reference arena's four described methods (docs/glossary.md) as example submissions, scored on the boards' dev items and on the
test split (the arena's submit path) beside the reference arena's own numbers. The reference arena's numbers are on 8-9B models at 32K
tokens on GPUs; these are on the embedded stand-in of the profile, so only the direction against the same
board's best baseline is comparable."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

EXAMPLES = Path(__file__).resolve().parent / "examples"
LABEL = "post: 8-9B models at 32K tokens on GPUs; here: the profile's embedded stand-in"


@dataclass(frozen=True)
class PostMethod:
    """One method as the reference arena reports it (its board, score and the bar it met) and the board it runs on here."""

    name: str
    board: str  # the board it is scored on here
    post_board: str  # the board the reference arena ran it on
    post_score: float
    post_bar: float
    post_bar_method: str
    why_board: str  # why ``board`` (the interface hook it needs and where the board rules run it)


POST_METHODS: tuple[PostMethod, ...] = (
    PostMethod("wherewhat_a", "A", "A", 0.812, 0.770, "Ada-KV", "score hook; the reference arena's board"),
    PostMethod("spanvote", "B_offline", "A", 0.811, 0.812, "wherewhat_a",
               "whole_cache hook: only B_offline's rules allow a one-off whole-cache compression here"),
    PostMethod("probevr", "B_online", "B_online", 0.647, 0.430, "KVzip", "probes hook; the reference arena's board"),
    PostMethod("kvprior", "C", "C", 0.713, 0.669, "H2O",
               "decode hook with params.npz; the reference arena's board (here: streaming eviction, not reasoning)"),
)
BAR_BASELINES = {"Ada-KV": "adasnapkv", "KVzip": "kvzip", "H2O": "h2o"}  # the reference arena's bars as arena baselines


def _verdict(lo: float, hi: float) -> str:
    return "better" if lo > 0 else "worse" if hi < 0 else "inconclusive"


def dev_row(arena: Any, method: PostMethod, folder: Path) -> dict[str, Any]:
    """The method's dev result beside its board's best baseline, with the paired 95% interval of the gain."""
    from .board_runner import submission_contender
    from .submissions.folder import load_submission

    sub = load_submission(folder)
    result = arena.dev(method.board, submission_contender(sub))
    scores, gain = result["scores"], result["gain"]
    mine, best = scores.loc[sub.name], scores.loc[result["best_baseline"]]
    row = {"overall": mine.overall, "lo": mine.lo, "hi": mine.hi, "best_baseline": result["best_baseline"],
           "baseline_overall": best.overall, "gain": gain.point, "gain_lo": gain.lo, "gain_hi": gain.hi,
           "verdict": _verdict(gain.lo, gain.hi)}
    bar = BAR_BASELINES.get(method.post_bar_method)
    if bar in scores.index:  # the reference arena's own comparator, where this board runs it: the paired gain over it
        from .scoring.score import paired_gain

        versus = paired_gain(result["units"], sub.name, bar)
        row.update(bar_baseline=bar, bar_gain=versus.point, bar_gain_lo=versus.lo, bar_gain_hi=versus.hi)
    return row


def submitted_row(arena: Any, method: PostMethod, folder: Path, secret: bytes) -> dict[str, Any]:
    """The method submitted on its board's test items (``Arena.submit``: the round's baselines, the gate against
    the board's best): its overall and the paired gain over that best, with 95% intervals."""
    entry = arena.submit(folder, method.board, secret)
    if entry.get("rejected"):
        return {"test_verdict": f"rejected: {entry.get('kind', '')} {entry.get('message', '')}".strip()}
    return {"test_overall": entry["overall"], "test_lo": entry["lo"], "test_hi": entry["hi"],
            "test_best": entry["best_before"], "test_gain": entry["gain"], "test_gain_lo": entry["gain_lo"],
            "test_gain_hi": entry["gain_hi"], "test_verdict": _verdict(entry["gain_lo"], entry["gain_hi"])}


def post_methods_table(arena: Any, examples: Path = EXAMPLES, secret: bytes | None = None,
                       test_root: Path | None = None, methods: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per post method: measured on the dev items of its board here (and, with ``secret``, submitted on
    the test items in an arena of its own at ``test_root``: its own ledger, so the caller's leaderboard and rate
    limits are untouched; the baselines' test rows the caller's arena kept in memory are read, not run again), beside the
    reference arena's numbers; a method whose folder or board is missing says why."""
    from .arena import Arena

    wanted = set(methods) if methods is not None else None
    tester = None
    if secret is not None:
        if test_root is None:
            raise ValueError("submitting on the test items needs test_root, an arena folder of its own")
        tester = Arena(arena.profile, test_root, progress=arena.progress)
    rows = []
    for method in POST_METHODS:
        if wanted is not None and method.name not in wanted:
            continue
        folder = examples / method.name
        row: dict[str, Any] = {"method": method.name, "board": method.board, "why_board": method.why_board}
        if not (folder / "method.py").is_file():
            row["verdict"] = "no folder"
        elif method.board not in arena.boards:
            row["verdict"] = f"board {method.board} not in this profile"
        else:
            row.update(dev_row(arena, method, folder))
            if tester is not None:
                row.update(submitted_row(tester, method, folder, secret))
        row.update({"post_board": method.post_board, "post_score": method.post_score,
                    "post_bar": f"{method.post_bar} ({method.post_bar_method})"})
        rows.append(row)
    table = pd.DataFrame(rows)
    return table[[c for c in COLUMNS if c in table.columns]]


COLUMNS = ("method", "board", "overall", "lo", "hi", "best_baseline", "baseline_overall", "gain", "gain_lo",
           "gain_hi", "verdict", "bar_baseline", "bar_gain", "bar_gain_lo", "bar_gain_hi", "test_overall", "test_lo",
           "test_hi", "test_best", "test_gain", "test_gain_lo", "test_gain_hi", "test_verdict", "post_board",
           "post_score", "post_bar", "why_board")
