"""The site's ranks from the public ledger alone equal the organiser's (issue 59, item 6): each entry's signed
payload records its paired comparison with every entry recorded before it (``arena.scoring.pairs``), so the
per-unit values in ``private/`` are no longer needed to tell entries apart. Checked on a synthetic board and on
notebook 08's committed B_offline round (whose committed ledger predates the record: there the public site falls
back to overlapping intervals and says so, and a re-recording of the same events with the record ranks alike)."""

from __future__ import annotations

import hashlib
import html
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.recording import paired_record, private_path, save_units
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.site import write_site

SAMPLES = Path(__file__).resolve().parents[1] / "figures" / "samples"
STEM = "08_search_arena_B_offline"


class _Standing(HTMLParser):
    """(rank text, entry name) of each row of a board page's standing table."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.depth = 0  # inside table.standing's tbody
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "standing" in (a.get("class") or "").split():
            self.depth = 1
        elif self.depth and tag == "tr" and "entry" in (a.get("class") or "").split():
            self.rows.append([])
        elif self.depth and tag == "td":
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.depth = 0
        elif tag == "td" and self.cell is not None and self.rows:
            self.rows[-1].append(html.unescape("".join(self.cell)).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def site_ranks(site: Path, board: str) -> dict[str, str]:
    """entry name -> rank as the board's page shows it (``1`` or ``1-4``)."""
    parser = _Standing()
    parser.feed((site / "boards" / f"{board}.html").read_text())
    return {row[1]: row[0].replace("\u2013", "-") for row in parser.rows}


def _public_copy(root: Path, to: Path) -> Path:
    """The ledger as a third party has it: the lines and the public key, no ``private/``."""
    to.mkdir(parents=True)
    for name in ("ledger.jsonl", "ledger.pub"):
        shutil.copyfile(root / name, to / name)
    return to / "ledger.jsonl"


def _both_sites(root: Path, tmp_path: Path, board: str) -> tuple[dict[str, str], dict[str, str], str]:
    """Ranks from the organiser's folder (with private/), ranks from the public copy, the public board page."""
    key = Ledger(root / "ledger.jsonl").public_key()
    write_site(root / "ledger.jsonl", tmp_path / "organiser", public_key=key)
    write_site(_public_copy(root, tmp_path / "public"), tmp_path / "public_site", public_key=key)
    return (site_ranks(tmp_path / "organiser", board), site_ranks(tmp_path / "public_site", board),
            (tmp_path / "public_site" / "boards" / f"{board}.html").read_text())


# --------------------------------------------------------------------------------------------- synthetic
def _units(means: dict[str, float], n: int = 40) -> dict[str, pd.DataFrame]:
    """Per-unit values sharing each unit's difficulty: paired differences far tighter than the overall intervals."""
    rng = np.random.default_rng(1)
    difficulty = rng.normal(0, 0.25, n)
    return {m: pd.DataFrame({"method": m, "context_id": [f"c{i}" for i in range(n)], "task": ["t1", "t2"] * (n // 2),
                             "overall": mu + difficulty + rng.normal(0, 0.01, n)}) for m, mu in means.items()}


def _synthetic(root: Path, record: bool) -> None:
    """A smoke-profile ledger: two baselines and two submissions 0.02 apart, each entry's units in private/."""
    ledger = Ledger(root / "ledger.jsonl")
    ledger.append("round", {"round": 1, "profile": "smoke", "commitment": "ab" * 32})
    for name, units in _units({"snapkv": 0.50, "tova": 0.48, "mine": 0.54, "other": 0.52}).items():
        kind = "baseline" if name in ("snapkv", "tova") else "submission"
        overall = float(units.overall.mean())
        entry = {"board": "A", "name": name, "author": name, "kind": kind, "round": 1, "overall": overall,
                 "lo": overall - 0.08, "hi": overall + 0.08, "eligible": True, "moved": True}
        if record:
            entry["paired"] = paired_record(ledger.events(), root, "A", 1, name, units)
        event = ledger.append(kind, entry)
        eid = f"baseline-{name}" if kind == "baseline" else f"entry-{event['seq']}"
        save_units(units, private_path(root, 1, "A", eid))


def test_synthetic_board_ranks_alike_with_and_without_the_private_folder(tmp_path):
    _synthetic(tmp_path / "arena", record=True)
    organiser, public, page = _both_sites(tmp_path / "arena", tmp_path, "A")
    assert organiser == public == {"mine": "1", "other": "2", "snapkv": "3", "tova": "4"}
    assert "fall back" not in page


def test_synthetic_board_without_the_record_falls_back_publicly_and_says_so(tmp_path):
    """A ledger from before the record: the organiser still pairs from private/, the public copy cannot."""
    _synthetic(tmp_path / "arena", record=False)
    organiser, public, page = _both_sites(tmp_path / "arena", tmp_path, "A")
    assert organiser == {"mine": "1", "other": "2", "snapkv": "3", "tova": "4"}
    assert public == {name: "1-4" for name in organiser}
    assert "Ranks partly fall back to overlapping overall intervals" in page


# --------------------------------------------------------------------------------------------- B_offline
def _committed_units() -> dict[str, pd.DataFrame]:
    frames = pd.read_csv(SAMPLES / f"{STEM}.csv.gz")  # entries, FRC, the baselines and the controls
    return {m: rows[["method", "context_id", "task", "overall"]].reset_index(drop=True)
            for m, rows in frames.groupby("method")}


def _private_units(root: Path, events: list[dict]) -> None:
    """The committed per-unit values under the ledger ids the organiser's folder names them by."""
    units = _committed_units()
    for event in events:
        if event["kind"] in ("baseline", "submission"):
            name = event["payload"]["name"]
            eid = f"baseline-{name}" if event["kind"] == "baseline" else f"entry-{event['seq']}"
            save_units(units[name], private_path(root, 1, "B_offline", eid))


@pytest.fixture
def committed(tmp_path) -> tuple[Path, list[dict]]:
    """Notebook 08's committed B_offline ledger with the organiser's per-unit values beside it."""
    if not (SAMPLES / f"{STEM}_ledger.jsonl").exists():
        pytest.skip("board B_offline's round is not committed")
    root = tmp_path / "committed"
    root.mkdir()
    for suffix, name in (("ledger.jsonl", "ledger.jsonl"), ("ledger.pub", "ledger.pub")):
        shutil.copyfile(SAMPLES / f"{STEM}_{suffix}", root / name)
    events = Ledger(root / "ledger.jsonl").events()
    _private_units(root, events)
    return root, events


def test_b_offline_committed_ledger_ranks_alike_publicly_and_privately(committed, tmp_path):
    """Issue 56's round was recorded with its pairs: the public copy (no private folder) ranks as the organiser's,
    with no fallback to overlapping intervals, and no seed's entry is ranked alone above StreamingLLM (none beat
    it, table_search_arena_gains_B_offline)."""
    root, _ = committed
    organiser, public, page = _both_sites(root, tmp_path, "B_offline")
    assert organiser == public and "fall back" not in page
    assert all(public[f"search-v1-{s}"] != "1" for s in range(5)) and public["streaming_llm"].startswith("1")


def test_b_offline_rerecorded_with_pairs_ranks_alike(committed, tmp_path):
    """The same events re-recorded by the organiser's recording function (``paired_record``) into a fresh
    ledger: the public copy ranks exactly as the organiser's folder, and as the committed round paired."""
    old_root, events = committed
    organiser_then, _, _ = _both_sites(old_root, tmp_path / "then", "B_offline")
    root = tmp_path / "rerecorded"
    ledger = Ledger(root / "ledger.jsonl")
    units = _committed_units()
    for event in events:
        body = dict(event["payload"])
        if event["kind"] in ("baseline", "submission"):
            name = body["name"]
            body["paired"] = paired_record(ledger.events(), root, "B_offline", 1, name, units[name])
            eid = f"baseline-{name}" if event["kind"] == "baseline" else f"entry-{event['seq']}"
            save_units(units[name], private_path(root, 1, "B_offline", eid))
        assert ledger.append(event["kind"], body, now=event["time"])["seq"] == event["seq"]
    organiser, public, page = _both_sites(root, tmp_path / "now", "B_offline")
    assert organiser == public == organiser_then and "fall back" not in page


# ------------------------------------------------------------------------------------- the recording path
def test_record_submission_records_each_pair_and_the_ledger_alone_ranks_as_the_private_files(tmp_path):
    """``recording.record_submission`` (what ``Arena.submit`` calls) writes ``paired`` against the baseline and
    the earlier entry, with the interval the per-unit files give; the leaderboard from the events alone then
    equals the one with the organiser's files."""
    from types import SimpleNamespace

    from cachecraft_lib.arena import recording
    from cachecraft_lib.arena.arena import Arena
    from cachecraft_lib.arena.scoring import leaderboard
    from cachecraft_lib.arena.scoring.pairs import pair_interval

    arena = Arena("smoke", tmp_path / "arena", progress=False)
    arena.ensure_round(hashlib.sha256(b"cachecraft tests: site ranks").hexdigest().encode(), 1)
    n, rng = 40, np.random.default_rng(3)
    difficulty = rng.normal(0, 0.25, n)

    def units(name: str, mean: float) -> pd.DataFrame:
        frame = pd.DataFrame({"method": name, "context_id": [f"c{i}" for i in range(n)],
                              "task": ["niah_single_1", "vt"] * (n // 2), "accuracy": 0.5, "memory": 0.5,
                              "memory_physical": 0.5, "speed": 0.5, "overhead": 0.0, "overhead_ratio": 0.0,
                              "generated": 0.0, "overall": mean + difficulty + rng.normal(0, 0.01, n)})
        frame.attrs["excluded_tasks"] = []
        return frame

    base = units("snapkv", 0.40)
    recording.save_units(base, arena._private(1, "A", "baseline-snapkv"))
    arena.ledger.append("baseline", {"board": "A", "name": "snapkv", "author": "baseline", "kind": "baseline",
                                     "round": 1, "overall": 0.40, "lo": 0.30, "hi": 0.50, "accuracy": 0.5,
                                     "memory": 0.5, "speed": 0.5, "eligible": True, "moved": True})
    mine = {}
    for name, mean in (("first", 0.43), ("second", 0.45)):
        mine[name] = units(name, mean)
        sub = SimpleNamespace(name=name, author=name, author_key=name, code_sha256=name[0] * 64)
        recording.record_submission(arena.ledger, arena.root, arena.boards["A"], sub, mine[name], 1, "frozen_bar",
                                    {"sandbox": "test"})
    events = arena.ledger.events()
    second = [e for e in events if e["kind"] == "submission"][-1]["payload"]["paired"]
    assert [(p["vs"], p["name"]) for p in second] == [("baseline-snapkv", "snapkv"), ("entry-2", "first")]
    expected = pair_interval(mine["second"], mine["first"])
    assert (second[1]["diff"], second[1]["lo"], second[1]["hi"]) == (expected.point, expected.lo, expected.hi)
    public = leaderboard.leaderboard(events)
    private = leaderboard.leaderboard(events, units=leaderboard.units_loader(arena.root))
    assert public.rank_range.tolist() == private.rank_range.tolist() == ["1", "2", "3"]
    assert set(public.rank_basis) == {leaderboard.PAIRED}
