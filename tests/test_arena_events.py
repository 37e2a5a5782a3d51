"""Ledger events typed (issue 59, item 4): one ``Kind`` enum instead of kind strings compared across the arena,
``Event`` a typed view of a line, ``Ledger.events(kind...)`` a filter, and the JSON on disk unchanged so the
committed ledgers still verify and read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachecraft_lib.arena.scoring.events import Event, Kind, of_kind, typed
from cachecraft_lib.arena.scoring.ledger import Ledger

SAMPLES = Path(__file__).resolve().parents[1] / "figures" / "samples"
COMMITTED = ["08_search_arena_B_offline", "08_search_arena"]


@pytest.mark.parametrize("stem", COMMITTED)
def test_committed_ledgers_verify_and_every_line_has_a_known_kind(stem, tmp_path):
    if not (SAMPLES / f"{stem}_ledger.jsonl").exists():
        pytest.skip(f"{stem} is not committed")
    for suffix in ("ledger.jsonl", "ledger.pub"):
        (tmp_path / suffix).write_bytes((SAMPLES / f"{stem}_{suffix}").read_bytes())
    raw = Ledger(tmp_path / "ledger.jsonl").events()  # verifies every line and signature
    events = typed(raw)
    assert events and all(e.kind is not None for e in events), {e.raw.get("kind") for e in events if e.kind is None}
    assert [e.seq for e in events] == list(range(len(raw)))
    looks = Ledger(tmp_path / "ledger.jsonl").events(Kind.TEST_LOOK)
    assert looks == [e for e in raw if e["kind"] == "test_look"] and looks


def test_the_json_on_disk_is_the_plain_string(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(Kind.SUBMISSION, {"board": "A", "name": "x", "round": 1})
    ledger.append("points", {"board": "A", "name": "x", "points": 1.0})  # a string still goes in
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["submission", "points"]
    assert type(ledger.events()[0]["kind"]) is str  # as read back: what old readers compare
    assert [e.kind for e in typed(ledger.events())] == [Kind.SUBMISSION, Kind.POINTS]
    assert ledger.events(Kind.POINTS) == ledger.events()[1:]
    with pytest.raises(ValueError, match="unknown ledger event kind"):
        ledger.append("submision", {})


def test_an_event_parses_leniently_and_names_its_entry():
    entry = Event.parse({"seq": 4, "kind": "submission", "payload": {"board": "A", "name": "m", "round": 2}})
    assert (entry.kind, entry.board, entry.name, entry.round, entry.entry_id) == (Kind.SUBMISSION, "A", "m", 2,
                                                                                   "entry-4")
    assert Event.parse({"kind": "baseline", "payload": {"name": "snapkv"}}).entry_id == "baseline-snapkv"
    odd = [Event.parse(x) for x in (None, {"seq": True, "kind": "nope", "payload": []}, {"kind": 3, "payload": "x"})]
    assert [(e.seq, e.kind, dict(e.payload), e.entry_id) for e in odd] == [(None, None, {}, None)] * 3
    events = [{"kind": "review"}, {"kind": "test_look"}, {"kind": "x"}, "junk"]
    assert of_kind(events, Kind.TEST_LOOK, Kind.REVIEW) == events[:2]
