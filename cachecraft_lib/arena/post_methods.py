"""The arena post's four described methods as example submissions, scored on the boards' dev items beside the
post's own numbers. The post's numbers are on 8-9B models at 32K tokens on GPUs; these are on the embedded
stand-in of the profile, so only the direction against the same board's best baseline is comparable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

EXAMPLES = Path(__file__).resolve().parent / "examples"


@dataclass(frozen=True)
class PostMethod:
    """One method as the post reports it: its folder here, its board, its score and the bar it met."""

    name: str
    board: str
    post_score: float
    post_bar: float
    post_bar_method: str
    needs: str  # the interface hook it needs beyond score/keep/decode ("" when none)


POST_METHODS: tuple[PostMethod, ...] = (
    PostMethod("wherewhat_a", "A", 0.812, 0.770, "Ada-KV", ""),
    PostMethod("spanvote", "A", 0.811, 0.812, "wherewhat_a", "whole cache (issue 37 item 2)"),
    PostMethod("probevr", "B_online", 0.647, 0.430, "KVzip", "probes (issue 37 item 3)"),
    PostMethod("kvprior", "C", 0.713, 0.669, "H2O", "params.npz (issue 37 item 4)"),
)


def _row(arena: Any, method: PostMethod, folder: Path) -> dict[str, Any]:
    """The method's dev result beside its board's best baseline, with the paired 95% interval of the gain."""
    from .board_runner import submission_contender
    from .submissions.folder import load_submission

    sub = load_submission(folder)
    name = sub.name
    result = arena.dev(method.board, submission_contender(sub))
    scores, gain = result["scores"], result["gain"]
    mine, best = scores.loc[name], scores.loc[result["best_baseline"]]
    verdict = "better" if gain.lo > 0 else "worse" if gain.hi < 0 else "inconclusive"
    return {"method": method.name, "board": method.board, "overall": mine.overall, "lo": mine.lo, "hi": mine.hi,
            "best_baseline": result["best_baseline"], "baseline_overall": best.overall, "gain": gain.point,
            "gain_lo": gain.lo, "gain_hi": gain.hi, "verdict": verdict,
            "post_score": method.post_score, "post_bar": f"{method.post_bar} ({method.post_bar_method})"}


def post_methods_table(arena: Any, examples: Path = EXAMPLES) -> pd.DataFrame:
    """One row per post method: measured here when its folder exists and the arena has its board, else the
    post's numbers with why it is not measured (a missing hook, or a board the profile lacks)."""
    rows = []
    for method in POST_METHODS:
        folder = examples / method.name
        if (folder / "method.py").is_file() and method.board in arena.boards:
            rows.append(_row(arena, method, folder))
        else:
            why = f"not built: needs {method.needs}" if method.needs else "no folder"
            if method.board not in arena.boards:
                why = f"board {method.board} not in this profile"
            rows.append({"method": method.name, "board": method.board, "verdict": why,
                         "post_score": method.post_score,
                         "post_bar": f"{method.post_bar} ({method.post_bar_method})"})
    return pd.DataFrame(rows)
