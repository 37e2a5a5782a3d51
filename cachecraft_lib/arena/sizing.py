"""How many test units resolve a gain of 0.02, and how many units each board's test split actually scored.

A **unit** is one test context (its questions averaged: a B context asks several), scored once per method. A
board's test split draws ``items["test"]`` contexts per task and length; the arena then scores only the tasks
where the full cache clears the board's floor (``score.excluded_tasks``), so fewer units may be scored than
drawn (board A on the cpu profile: 96 drawn, 84 scored, variable tracking excluded). The gains a test split
resolves are computed on the units it scored, read from the per-unit files the arena keeps for every entry
(``<root>/private/round<r>/<board>/``), after the test runs; a board no run scored says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..methods.registry import NO_PRESS
from ..stats.intervals import POWER, units_for_power, z_for_power, z_two_sided
from .boards.boards import Board
from .calibration import resolvable_gain
from .recording import private_path

UNIT = ("a unit is one test context (its questions averaged), scored once per method; drawn: contexts the test "
        "split draws (items x tasks x lengths); scored: those of the tasks where the full cache clears the "
        "board's floor, the units every entry's interval is computed on")


@dataclass(frozen=True)
class Scored:
    """The units a board's test split scored (read from the full cache's per-unit file) and their tasks."""

    units: int
    tasks: tuple[str, ...]


def drawn_test_units(board: Board) -> int:
    """Contexts the board's test split draws: items per task and length, over its tasks and lengths."""
    return int(board.items["test"]) * len(board.tasks) * len(board.lengths)


def scored_test_units(roots: Iterable[str | Path], round_: int = 1) -> dict[str, Scored]:
    """Per board: the units its test split scored in round ``round_``, from the full cache's per-unit file
    (``baseline-no_press.parquet``; every entry of a round is scored on the same units). ``roots``: arena folders
    in order of preference (the first that scored a board gives its count). The files are found where
    ``recording.private_path`` writes them, any board (the pattern is relative, so a root is never a pattern)."""
    found: dict[str, Scored] = {}
    pattern = str(private_path(Path(), round_, "*", f"baseline-{NO_PRESS}"))
    for root in roots:
        for path in sorted(Path(root).glob(pattern)):
            if path.parent.name not in found:
                units = pd.read_parquet(path, columns=["context_id", "task"])
                found[path.parent.name] = Scored(units.context_id.nunique(), tuple(sorted(set(units.task))))
    return found


def sizing_row(board: Board, dev_units: pd.DataFrame, pair: list[str], scored: Scored | None) -> dict[str, object]:
    """One board: the dev variance of ``pair``'s per-unit difference, the units a gain of ``gain_to_resolve``
    needs (80% power), and what the scored test units resolve (nothing where no run scored the board)."""
    wide = dev_units.pivot_table(index="context_id", columns="method", values="overall")
    diff = wide[pair[0]] - wide[pair[1]]
    half = resolvable_gain(diff, len(diff))  # the 95% half-width on the dev units
    n = scored.units if scored else None
    gain = board.gain_to_resolve
    return {"board": board.name, "pair": " - ".join(pair), "sd": diff.std(ddof=1),
            f"units for {gain:g} ({POWER:.0%} power)": units_for_power(len(diff), half, gain),
            "test units drawn": drawn_test_units(board), "test units scored": n if n else math.nan,
            "test tasks not scored": (", ".join(t for t in board.tasks if t not in scored.tasks) or "none")
                                     if scored else "not scored in this run",
            "gain resolved": resolvable_gain(diff, n) if n else math.nan,
            f"gain resolved ({POWER:.0%} power)": half * math.sqrt(len(diff) / n) * z_for_power() / z_two_sided()
                                                   if n else math.nan}


def sizing_table(boards: Mapping[str, Board], dev_units: Mapping[str, pd.DataFrame],
                 pairs: Mapping[str, list[str]], scored: Mapping[str, Scored]) -> pd.DataFrame:
    """``sizing_row`` for every board (``pairs``: the two best baselines on its dev items)."""
    return pd.DataFrame([sizing_row(board, dev_units[name], pairs[name], scored.get(name))
                         for name, board in boards.items()])
