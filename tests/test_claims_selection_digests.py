"""``selected.json``'s digests travel into the entry's origin (second red team, 2026-12-05):
``search.submit.prepare`` carries them (``carry_selection``, for ``submit-search`` and notebook 08 alike) and
``verify_claim`` compares the run folder's with the origin's, so a selection file rewritten after the entry,
every file agreeing with the others, is caught. No model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import yaml
from test_search_arena_claims import OWNER, _enter, _origin, _plan, _selected_run

from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.submissions.folder import METADATA_FILE, metadata_origin
from cachecraft_lib.search import selection
from cachecraft_lib.search.preregister import verify_claim
from cachecraft_lib.search.submit import carry_selection, run_origin


def _units(run: Path, c_values: list[float]) -> None:
    """Per-unit selection-half values agreeing with the shortlist (a 0.1, b 0.6, c 0.8: c's the mean of
    ``c_values``), their digest written into selected.json, as ``select`` would have."""
    folder = run / selection.SELECTED
    rows = [("a", "x", 0.1), ("b", "x", 0.6)] + [("c", f"x{i}", v) for i, v in enumerate(c_values)]
    pd.DataFrame([{"child_id": c, "context_id": x, "task": "t", "overall": v, "random_seed": 0} for c, x, v in rows]
                 ).to_csv(folder / selection.UNITS_FILE, index=False)
    info = json.loads((folder / "selected.json").read_text())
    info["selection_units_sha256"] = hashlib.sha256((folder / selection.UNITS_FILE).read_bytes()).hexdigest()
    (folder / "selected.json").write_text(json.dumps(info))


def _entry(tmp_path: Path, carried: bool) -> tuple[Ledger, dict, Path]:
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    plan = _plan(ledger)
    run, sha = _selected_run(tmp_path, ledger, plan)
    _units(run, [0.8])
    digests = selection.selection_digests(run) if carried else {}
    assert not carried or set(digests) == set(selection.DIGEST_KEYS)
    origin = _origin(plan, run_id=run_origin(run)["run_id"], child_id="c", **digests)
    return ledger, _enter(ledger, OWNER, sha, origin), run


def test_a_selection_file_rewritten_after_the_entry_fails_against_the_digests_in_the_ledger(tmp_path):
    ledger, entry, run = _entry(tmp_path, carried=True)
    assert verify_claim(ledger.events(), entry, run).verified
    _units(run, [0.7, 0.9])  # c's value split in two, its mean kept: the files still agree with one another
    assert selection.files_disagree(run) == "" and selection.selection_broken(run, 3) == ""
    verdict = verify_claim(ledger.events(), entry, run)
    assert not verdict.holds and "selection_units_sha256 differ from the entry's origin" in verdict.reason


def test_an_origin_without_digests_is_verified_with_a_note(tmp_path):
    ledger, entry, run = _entry(tmp_path, carried=False)
    verdict = verify_claim(ledger.events(), entry, run)
    assert verdict.verified and "carries no selection digests" in verdict.reason


def test_submit_search_carries_the_digests_into_the_metadata_origin(tmp_path):
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    run, _ = _selected_run(tmp_path, ledger, _plan(ledger))
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / METADATA_FILE).write_text(yaml.safe_dump({"name": "e", "origin": {"kind": "search", "child_id": "c"}}))
    prepared = SimpleNamespace(folder=folder, origin={"kind": "search", "child_id": "c"})
    carried = carry_selection(prepared, str(run))
    assert carried == selection.selection_digests(run) and carried
    origin = yaml.safe_load((folder / METADATA_FILE).read_text())["origin"]
    assert origin == {"kind": "search", "child_id": "c", **carried} and prepared.origin == origin
    other = SimpleNamespace(folder=folder, origin={"kind": "search", "child_id": "a", "rank": 2})  # not the pick
    assert carry_selection(other, str(run)) == {}


def test_the_arena_keeps_the_carried_digests_in_the_origin_it_records(tmp_path):
    folder = tmp_path / "entry"
    folder.mkdir()
    digests = {"shortlist_sha256": "a" * 64, "selection_units_sha256": "b" * 64}
    (folder / METADATA_FILE).write_text(yaml.safe_dump({"origin": {"kind": "search", **digests}}))
    assert digests.items() <= (metadata_origin(folder) or {}).items()
