"""What the site shows, gathered from the ledger's events: boards and their rules, standings with rank ranges,
each entry's events, and the texts (DESCRIPTION.md, dev report) matched to the code the ledger names.

Rules come from the board data of the profile the ledger's ``round`` event names (the same YAML the harness
scored with); a board whose file carries another rules version than its entries is marked. A submission's text
is shown only from a folder whose ``method.py`` hashes to the ``code_sha256`` in the ledger, so a page never
pairs scores with a description of other code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import leaderboard
from ..boards import Board, BoardError, load_boards

SLUG_RE = re.compile(r"[^a-z0-9_-]+")


@dataclass
class Texts:
    """A submission's files as text (never run): matched to the ledger by its code's hash."""

    description: str | None = None
    dev_report: dict[str, Any] | None = None
    source: str = ""


@dataclass
class SiteData:
    events: list[dict]
    profile: str | None
    boards: dict[str, Board]
    standings: dict[str, pd.DataFrame]
    texts: dict[str, Texts] = field(default_factory=dict)

    def entry_events(self, board: str, name: str) -> list[dict]:
        """The events about one entry (its scores, points, reviews, rejections), in ledger order."""
        return [e for e in self.events if leaderboard.payload(e).get("board") == board
                and leaderboard.payload(e).get("name") == name]


def rank_range(lo: pd.Series, hi: pd.Series) -> list[tuple[int, int]]:
    """Ranks an entry could hold given the 95% intervals: best = 1 + entries whose interval lies wholly above
    its own, worst = count - entries wholly below. Overlapping intervals share ranks (``2-4``)."""
    lo, hi = lo.to_numpy(dtype=float), hi.to_numpy(dtype=float)
    return [(1 + int((lo > h).sum()), len(lo) - int((hi < l_).sum())) for l_, h in zip(lo, hi, strict=True)]


def with_rank_ranges(table: pd.DataFrame) -> pd.DataFrame:
    """``rank_lo``/``rank_hi`` per entry: among the eligible entries, then the ineligible ones after them
    (the leaderboard's order). Uses the leaderboard's own ranges when it provides them."""
    if {"rank_lo", "rank_hi"} <= set(table.columns) and table.rank_lo.notna().all():
        return table
    table = table.copy()
    lo = table.lo.fillna(table.overall)
    hi = table.hi.fillna(table.overall)
    ranks: list[tuple[int, int]] = [(0, 0)] * len(table)
    offset = 0
    for eligible in (True, False):
        rows = [i for i, e in enumerate(table.eligible.astype(bool)) if e == eligible]
        for i, (a, b) in zip(rows, rank_range(lo.iloc[rows], hi.iloc[rows]), strict=True):
            ranks[i] = (a + offset, b + offset)
        offset += len(rows)
    table["rank_lo"], table["rank_hi"] = [r[0] for r in ranks], [r[1] for r in ranks]
    return table


def profile_of(events: Iterable[dict], default: str | None = None) -> str | None:
    """The profile the ledger's first ``round`` event names (``default`` when none does)."""
    for event in events:
        if event.get("kind") == "round" and leaderboard.payload(event).get("profile"):
            return str(leaderboard.payload(event)["profile"])
    return default


def gather(events: list[dict], profile: str | None = None, folders: Iterable[str | Path] = (),
           root: Path | None = None) -> SiteData:
    """Everything the pages need; ``folders``: submission folders to match to the ledger's code hashes."""
    profile = profile_of(events, profile)
    try:
        boards = load_boards(profile) if profile else {}
    except BoardError:
        boards = {}
    table = leaderboard.leaderboard(events)
    names = list(dict.fromkeys([*boards, *([] if table.empty else table.board.tolist())]))
    standings = {b: with_rank_ranges(table[table.board == b].reset_index(drop=True)) if not table.empty
                 else table for b in names}
    data = SiteData(events, profile, boards, standings)
    data.texts = match_texts(events, folders, root)
    return data


def code_hash(folder: Path) -> str | None:
    method = folder / "method.py"
    return hashlib.sha256(method.read_bytes()).hexdigest() if method.is_file() else None


def match_texts(events: list[dict], folders: Iterable[str | Path], root: Path | None) -> dict[str, Texts]:
    """``code_sha256 -> Texts`` for every folder whose code the ledger names; dev reports from the folder's
    ``dev_report.json`` or the arena's ``dev/<board>/<name>-dev_report.json`` (``arena judge --run-dev``)."""
    named = {leaderboard.payload(e).get("code_sha256"): leaderboard.payload(e) for e in events
             if e.get("kind") == "submission" and leaderboard.payload(e).get("code_sha256")}
    texts: dict[str, Texts] = {}
    for folder in map(Path, folders):
        digest = code_hash(folder)
        if digest not in named:
            continue
        entry = named[digest]
        desc = folder / "DESCRIPTION.md"
        report = _first_json([folder / "dev_report.json", *(
            [root / "dev" / str(entry.get("board")) / f"{entry.get('name')}-dev_report.json"] if root else [])])
        texts[digest] = Texts(desc.read_text(encoding="utf-8", errors="replace") if desc.is_file() else None,
                              report, (folder / "method.py").read_text(encoding="utf-8", errors="replace"))
    return texts


def _first_json(paths: list[Path]) -> dict[str, Any] | None:
    for path in paths:
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                return {"error": f"{path.name} is not valid JSON"}
    return None


def slug(board: str, name: str) -> str:
    """A file name for an entry's page: readable, safe on any host, unique per (board, name)."""
    tag = hashlib.sha256(f"{board}\0{name}".encode()).hexdigest()[:8]
    return f"{SLUG_RE.sub('-', f'{board}-{name}'.lower()).strip('-')[:60]}-{tag}.html"
