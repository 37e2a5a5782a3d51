"""What ``Arena.dev`` and ``Arena.submit`` return: named fields instead of dicts with optional keys.

``DevReport`` (a method on the dev items beside the baselines), ``Entry`` (a scored official submission) and
``Rejection`` (a refused one). Each also reads like the dict it replaces (``report["gain"]``,
``entry.get("rejected")``), so notebooks and scripts written against the dicts keep working; ``as_dict`` gives
plain JSON-able values for ``--json`` (``cli``: one object per line, ``pandas.read_json(lines=True)``).
An ``Entry``'s ``recorded`` is its ledger payload as written; keys that are not fields (``accuracy``,
``origin``, ``probes`` ...) are read from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd


class _ReadsLikeADict:
    """``obj[key]`` and ``obj.get(key)`` over the dataclass's fields (and its ``recorded`` payload, if any)."""

    def _extra(self) -> dict:
        return getattr(self, "recorded", {}) or {}

    def __getitem__(self, key: str) -> Any:
        if key in {f.name for f in fields(self)}:
            return getattr(self, key)
        if key in self._extra():
            return self._extra()[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in {f.name for f in fields(self)}:
            raise KeyError(f"{type(self).__name__} has no field {key!r}")
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return key in {f.name for f in fields(self)} or key in self._extra()

    def keys(self) -> list[str]:
        """Field names (then the payload's other keys): ``{**report}`` and ``dict(report)`` work."""
        names = [f.name for f in fields(self) if f.name != "recorded"]
        return names + [k for k in self._extra() if k not in names]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def _plain(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return value.reset_index().to_dict(orient="records")
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "item"):
        return value.item()
    return value


@dataclass
class DevReport(_ReadsLikeADict):
    """A method on the dev items: ``scores`` per method (with intervals), the paired ``gain`` over the best
    baseline (``stats.intervals.Interval``), eligibility; ``failed_baselines`` only on the Ray path."""

    board: str
    method: str
    scores: pd.DataFrame
    units: pd.DataFrame
    best_baseline: str
    gain: Any
    eligible: bool
    eligibility: str
    excluded_tasks: list[str]
    failed_baselines: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: the scores as records, the gain as point/lo/hi; the per-unit values left out."""
        gain = self.gain
        return {"board": self.board, "method": self.method, "scores": _plain(self.scores),
                "best_baseline": self.best_baseline,
                "gain": {"point": float(gain.point), "lo": float(gain.lo), "hi": float(gain.hi)},
                "eligible": bool(self.eligible), "eligibility": self.eligibility,
                "excluded_tasks": list(self.excluded_tasks), "failed_baselines": dict(self.failed_baselines)}


@dataclass
class Entry(_ReadsLikeADict):
    """A scored official submission: its score with interval, the gate against the board's best, points."""

    board: str
    name: str
    author: str
    round: int
    entry_id: str
    overall: float
    lo: float
    hi: float
    best_before: str
    gain: float
    gain_lo: float
    gain_hi: float
    moved: bool
    eligible: bool
    points: float
    sandbox: str
    recorded: dict = field(repr=False, default_factory=dict)
    rejected: bool = False

    @classmethod
    def from_payload(cls, payload: dict, entry_id: str, points: float) -> Entry:
        names = {f.name for f in fields(cls)} - {"recorded", "entry_id", "points", "rejected"}
        return cls(**{k: payload[k] for k in names}, entry_id=entry_id, points=points, recorded=dict(payload))

    def as_dict(self) -> dict[str, Any]:
        return {**self.recorded, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "recorded"}}


@dataclass
class Rejection(_ReadsLikeADict):
    """A refused submission as the ledger recorded it (``kind``: one of ``submissions.errors.KINDS``)."""

    board: str
    name: str
    author: str
    author_key: str
    kind: str
    message: str
    on_test: bool
    rejected: bool = True

    @classmethod
    def from_payload(cls, payload: dict) -> Rejection:
        names = {f.name for f in fields(cls)} - {"rejected"}
        return cls(**{k: payload[k] for k in names})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
