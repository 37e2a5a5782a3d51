"""Grid cells: one (model, length, method, ratio, query-aware, samples) each, the profile's grid and shards."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..methods.registry import REGISTRY
from ..profiles import Profile


@dataclass(frozen=True)
class Cell:
    """One grid cell. ``samples_per_task=None`` means the full dataset (500 per task)."""

    model: str
    length: int
    method: str
    ratio: float
    query_aware: bool = False
    samples_per_task: int | None = None
    seed: int = 42
    ruler_source: str = "auto"
    tasks: tuple[str, ...] | None = None  # None = all 13
    max_new_tokens: int | None = None  # None = the row's (KVPress's --max_new_tokens override otherwise)

    @property
    def key(self) -> str:
        """Folder name, KVPress-style: ``ruler__4096__<model>__<method>__0.88[__query_aware]__n10__seed42``."""
        model = Path(self.model).name if Path(self.model).exists() else self.model.replace("/", "--")
        parts = ["ruler", str(self.length), model, self.method, f"{self.ratio:.2f}"]
        if self.query_aware:
            parts.append("query_aware")
        parts += [f"n{self.samples_per_task or 'all'}", f"seed{self.seed}", self.ruler_source]
        if self.tasks is not None:
            parts.append("tasks-" + hashlib.sha256(",".join(self.tasks).encode()).hexdigest()[:8])
        if self.max_new_tokens is not None:
            parts.append(f"max{self.max_new_tokens}")
        return "__".join(parts)

    @property
    def group(self) -> tuple:
        """Cells of one group share the model, the dataset and so the prefill of every sample."""
        return (self.model, self.length, self.query_aware, self.samples_per_task, self.seed, self.ruler_source,
                self.tasks, self.max_new_tokens)

    def config(self) -> dict[str, Any]:
        return asdict(self)


def cell_settings(profile: Profile, query_aware: bool | None = None) -> dict[str, Any]:
    """What every cell of a profile shares besides (model, length, method, ratio): ``Cell(m, n, method, r,
    **cell_settings(profile))`` is a cell of the profile's grid (None: the profile's query-aware setting)."""
    qa = profile.query_aware if query_aware is None else query_aware
    return dict(query_aware=qa, samples_per_task=profile.samples_per_task, seed=profile.seed,
                ruler_source=profile.ruler_source, tasks=profile.tasks, max_new_tokens=profile.max_new_tokens)


def grid_methods() -> list[str]:
    """The registered methods the grid runs: those with a prefill press that need no prefill of their own."""
    return [n for n, m in REGISTRY.items() if m.prefill and not m.own_prefill]


def grid_cells(profile: Profile, methods: Iterable[str] | None = None, ratios: Iterable[float] | None = None,
               lengths: Iterable[int] | None = None, query_aware: bool | None = None,
               include_no_press: bool = True) -> list[Cell]:
    """The profile's grid: every model x length x method x ratio, plus one ``no_press`` cell per model x length."""
    methods = list(profile.methods if methods is None else methods)
    runnable = grid_methods()
    unknown = [m for m in methods if m not in runnable]
    if unknown:
        raise ValueError(f"method(s) {unknown} cannot run in the grid; its methods (a prefill press on the shared "
                         f"pipeline): {', '.join(runnable)}")
    common = cell_settings(profile, query_aware)
    cells = []
    for model in profile.models:
        for length in (lengths or profile.lengths):
            if include_no_press and "no_press" not in methods:
                cells.append(Cell(model, length, "no_press", 0.0, **common))
            for method in methods:
                for ratio in ([0.0] if method == "no_press" else (ratios or profile.ratios)):
                    cells.append(Cell(model, length, method, float(ratio), **common))
    return cells


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/n"`` (0-based i) -> (i, n), checked."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {spec!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard {spec}: need n >= 1 and 0 <= i < n")
    return i, n


def select_shard(cells: list[Cell], index: int, count: int) -> list[Cell]:
    """Every ``count``-th cell in key order, starting at ``index``: disjoint shards that cover the grid."""
    return sorted(cells, key=lambda c: c.key)[index::count]
