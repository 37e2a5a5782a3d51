"""Notebook 07's per-sample file: every per-unit value its arena tables are computed from, one row per (method,
unit), with the board, the split and the arena folder it was scored in.

Why a folder column: the reference arena's methods are submitted in an arena of their own (``post_methods``:
its own ledger, so the main leaderboard is untouched), which records its own baselines on the same test items;
``arena`` says which ledger a row belongs to, so each table is recomputed from its own rows.
``KeepDevUnits`` keeps the per-unit values of the dev reports a caller asks for (the post methods' dev rows are
computed inside ``post_methods_table``, which returns only their summary).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd


class KeepDevUnits:
    """An ``Arena`` whose ``dev`` also keeps each report's per-unit values of the method it scored
    (``units``); everything else is the wrapped arena's."""

    def __init__(self, arena: Any) -> None:
        self._arena = arena
        self.units: list[pd.DataFrame] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._arena, name)

    def dev(self, board_name: str, contender: Any) -> Any:
        report = self._arena.dev(board_name, contender)
        units = report["units"]
        self.units.append(units[units.method == report["method"]].assign(board=board_name))
        return report


def private_units(root: str | Path) -> pd.DataFrame:
    """Every per-unit test file of an arena folder (baselines and entries, every round), with its board: only the
    round folders (``recording.private_path``), not the Ray workers' partial files beside them."""
    paths = sorted((Path(root) / "private").glob("round*/*/*.parquet"))
    return pd.concat([pd.read_parquet(p).assign(board=p.parent.name) for p in paths], ignore_index=True) \
        if paths else pd.DataFrame()


def arena_samples(dev_units: Mapping[str, pd.DataFrame], roots: Mapping[str, str | Path],
                  extra_dev: Iterable[pd.DataFrame] = ()) -> pd.DataFrame:
    """Dev units per board (the baselines', then ``extra_dev``: methods scored on the same dev items) and the
    test units of each arena folder in ``roots`` (name -> folder), tagged with ``board``, ``split`` and ``arena``."""
    dev = [u.assign(board=b) for b, u in dev_units.items()] + list(extra_dev)
    parts = [pd.concat(dev, ignore_index=True).assign(split="dev", arena="main")] if dev else []
    for name, root in roots.items():
        units = private_units(root)
        if len(units):
            parts.append(units.assign(split="test", arena=name))
    return pd.concat(parts, ignore_index=True)
