"""What the site shows, gathered from the ledger's events: boards and their rules, standings with rank ranges,
each entry's events, and the texts (DESCRIPTION.md, dev report) matched to the code the ledger names.

A submission folder is its author's: its ``DESCRIPTION.md`` and ``method.py`` are read only through
``safe_files`` (the judges' bundle's check: plain files inside the folder, no symbolic link, a size cap, nothing
under an arena's ``private/``), and a ``dev_report.json`` in it is never read: the dev report shown is the
arena's own measurement from its ``dev/`` folder (``arena judge --run-dev``), as the judges read it.

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

from ..boards.boards import Board, BoardError, load_boards
from ..scoring import leaderboard
from ..scoring.events import Kind
from ..submissions import safe_files
from ..submissions.folder import MAX_METHOD_BYTES

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


def with_rank_ranges(table: pd.DataFrame) -> pd.DataFrame:
    """``rank_lo``/``rank_hi`` per entry from the leaderboard's own range (``"2-4"``): the paired differences
    the ledger records, else the organiser's per-unit values, else overlapping intervals (``rank_basis``)."""
    table = table.copy()
    bounds = [str(r).split("-") for r in table.rank_range]
    table["rank_lo"] = [int(b[0]) for b in bounds]
    table["rank_hi"] = [int(b[-1]) for b in bounds]
    return table


def profile_of(events: Iterable[dict], default: str | None = None) -> str | None:
    """The profile the ledger's first ``round`` event names (``default`` when none does)."""
    for event in events:
        if event.get("kind") == Kind.ROUND and leaderboard.payload(event).get("profile"):
            return str(leaderboard.payload(event)["profile"])
    return default


def gather(events: list[dict], profile: str | None = None, folders: Iterable[str | Path] = (),
           root: Path | None = None) -> SiteData:
    """Everything the pages need; ``folders``: submission folders to match to the ledger's code hashes. With the
    organiser's ``<root>/private/`` the pairs the ledger does not record (older ledgers) are paired from it;
    the pairs it records rank the same either way (``scoring.pairs``)."""
    profile = profile_of(events, profile)
    try:
        boards = load_boards(profile) if profile else {}
    except BoardError:
        boards = {}
    private = root / "private" if root is not None else None
    units = leaderboard.units_loader(root, events=events) if private is not None and private.is_dir() else None
    table = leaderboard.leaderboard(events, units=units)
    names = list(dict.fromkeys([*boards, *([] if table.empty else table.board.tolist())]))
    standings = {b: with_rank_ranges(table[table.board == b].reset_index(drop=True)) if not table.empty
                 else table for b in names}
    data = SiteData(events, profile, boards, standings)
    data.texts = match_texts(events, folders, root)
    return data


def match_texts(events: list[dict], folders: Iterable[str | Path], root: Path | None) -> dict[str, Texts]:
    """``code_sha256 -> Texts`` for every folder whose code the ledger names: its ``DESCRIPTION.md`` and
    ``method.py`` through ``safe_files``, the dev report only from the arena's own
    ``<root>/dev/<board>/<name>-dev_report.json`` (never the folder's ``dev_report.json``)."""
    named = {leaderboard.payload(e).get("code_sha256"): leaderboard.payload(e) for e in events
             if e.get("kind") == Kind.SUBMISSION and leaderboard.payload(e).get("code_sha256")}
    private = root / "private" if root else None
    texts: dict[str, Texts] = {}
    for folder in map(Path, folders):
        raw = safe_files.read_bytes(folder / "method.py", folder, private, MAX_METHOD_BYTES)
        digest = hashlib.sha256(raw).hexdigest() if raw is not None else None
        if raw is None or digest not in named:
            continue
        texts[digest] = Texts(safe_files.read_text(folder / "DESCRIPTION.md", folder, private),
                              _dev_report(root, named[digest]), raw.decode("utf-8", errors="replace"))
    return texts


def _dev_report(root: Path | None, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The arena's dev report for ``entry`` from ``<root>/dev/``, read through ``safe_files`` (None if absent)."""
    if root is None:
        return None
    dev = root / "dev"
    text = safe_files.read_text(dev / str(entry.get("board")) / f"{entry.get('name')}-dev_report.json", dev,
                                root / "private")
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"error": f"{entry.get('name')}-dev_report.json is not valid JSON"}


def slug(board: str, name: str) -> str:
    """A file name for an entry's page: readable, safe on any host, unique per (board, name)."""
    tag = hashlib.sha256(f"{board}\0{name}".encode()).hexdigest()[:8]
    return f"{SLUG_RE.sub('-', f'{board}-{name}'.lower()).strip('-')[:60]}-{tag}.html"
