"""Replaying a committed notebook 08 round (search.round_replay): the revealed secret must match the signed ledger's
commitment, the plan must be the committed one, and anything else is refused with what to do instead."""

from __future__ import annotations

import json
import shutil

import pytest

from cachecraft_lib.paths import REPO
from cachecraft_lib.search import round_replay
from cachecraft_lib.search.preregister import plan_hash
from cachecraft_lib.search.round_replay import ReplayRefused, check_plan, committed_round, resolve_mode

SAMPLES = REPO / "figures" / "samples"
STEMS = ("08_search_arena", "08_search_arena_B_offline")


def _copy(stem: str, tmp_path):
    for path in round_replay.record_files(SAMPLES, stem):
        shutil.copyfile(path, tmp_path / path.name)
    return tmp_path


@pytest.mark.parametrize("stem", STEMS)
def test_the_committed_rounds_verify(stem):
    found = committed_round(SAMPLES, stem)
    assert found is not None and found.plan["board"] == ("A" if stem == STEMS[0] else "B_offline")
    assert found.plan["random_seeds"] == [0, 1, 2, 3, 4] and len(found.secret) == 64
    check_plan(found, dict(found.plan))  # its own plan replays


def test_no_revealed_secret_means_no_round(tmp_path):
    folder = _copy(STEMS[0], tmp_path)
    (folder / f"{STEMS[0]}_revealed_secret.txt").unlink()
    assert committed_round(folder, STEMS[0]) is None


def test_a_secret_that_is_not_the_rounds_is_refused(tmp_path):
    folder = _copy(STEMS[0], tmp_path)
    path = folder / f"{STEMS[0]}_revealed_secret.txt"
    text = path.read_text().strip()
    path.write_text(("0" if text[0] != "0" else "1") + text[1:])
    with pytest.raises(ReplayRefused, match="not this round's secret"):
        committed_round(folder, STEMS[0])


def test_an_edited_ledger_is_refused(tmp_path):
    folder = _copy(STEMS[0], tmp_path)
    path = folder / f"{STEMS[0]}_ledger.jsonl"
    lines = path.read_text().splitlines()
    event = json.loads(lines[0])
    event["payload"]["generations"] = 9  # a plan rewritten after the fact
    path.write_text("\n".join([json.dumps(event), *lines[1:]]) + "\n")
    with pytest.raises(ReplayRefused, match="does not verify"):
        committed_round(folder, STEMS[0])


def test_a_secret_without_its_ledger_is_refused(tmp_path):
    folder = _copy(STEMS[0], tmp_path)
    (folder / f"{STEMS[0]}_ledger.pub").unlink()
    with pytest.raises(ReplayRefused, match="without its ledger"):
        committed_round(folder, STEMS[0])


def test_another_plan_is_a_new_study():
    found = committed_round(SAMPLES, STEMS[0])
    plan = {**found.plan, "generations": found.plan["generations"] + 1}
    plan["plan_hash"] = plan_hash(plan)
    with pytest.raises(ReplayRefused, match="generations"):
        check_plan(found, plan)
    with pytest.raises(ReplayRefused, match="its hash"):  # the same fields under a hash that is not theirs
        check_plan(found, {**found.plan, "plan_hash": "0" * 64})


@pytest.mark.parametrize("stem,board", [(STEMS[0], "A"), (STEMS[1], "B_offline")])
def test_the_committed_programs_are_what_the_round_submitted(stem, board, tmp_path):
    found = committed_round(SAMPLES, stem)
    entries = round_replay.committed_entries(found, board)
    chosen = {s: (e["origin"]["child_id"], (SAMPLES / f"{stem}_programs" / f"seed{s}.py").read_text())
              for s, e in entries.items()}
    assert sorted(chosen) == [0, 1, 2, 3, 4]
    round_replay.check_chosen(found, board, chosen, tmp_path / "ok")
    child, code = chosen[2]
    with pytest.raises(ReplayRefused, match="seed 2"):  # one constant nudged: another program, another study
        round_replay.check_chosen(found, board, {**chosen, 2: (child, code.replace("1.0", "1.01", 1) + "\n")},
                                  tmp_path / "code")
    with pytest.raises(ReplayRefused, match="seed 2"):  # the same code under another child's name
        round_replay.check_chosen(found, board, {**chosen, 2: ("cand-other", code)}, tmp_path / "id")
    with pytest.raises(ReplayRefused, match="submitted seeds"):
        round_replay.check_chosen(found, board, {s: chosen[s] for s in (0, 1)}, tmp_path / "fewer")


def test_scores_must_be_the_recorded_ones():
    found = committed_round(SAMPLES, STEMS[0])
    round_replay.check_scores(found, found.events)
    moved = [json.loads(json.dumps(e)) for e in found.events]
    target = next(e for e in moved if e["kind"] == "baseline")
    target["payload"]["overall"] += 1e-6
    with pytest.raises(ReplayRefused, match=target["payload"]["name"]):
        round_replay.check_scores(found, moved)
    with pytest.raises(ReplayRefused, match="do not score"):  # an entry the replay never made
        round_replay.check_scores(found, [e for e in found.events if e["payload"].get("name") != "frc"])


def test_a_replay_needs_an_arena_of_its_own():
    round_replay.check_fresh_arena([])
    with pytest.raises(ReplayRefused, match="ROOT"):
        round_replay.check_fresh_arena([{"kind": "baseline", "payload": {}}])


def test_the_mode():
    found = committed_round(SAMPLES, STEMS[0])
    assert resolve_mode("auto", found, sizes_given=False) == "replay"
    with pytest.raises(ReplayRefused, match="ROUND='new'"):  # other sizes would overwrite the committed round
        resolve_mode("auto", found, sizes_given=True)
    assert resolve_mode("new", found, sizes_given=True) == "new"
    assert resolve_mode("auto", None, sizes_given=False) == "new"
    assert resolve_mode("new", found, sizes_given=False) == "new"
    assert resolve_mode("replay", found, sizes_given=False) == "replay"
    with pytest.raises(ReplayRefused, match="no revealed round"):
        resolve_mode("replay", None, sizes_given=False)
    with pytest.raises(ValueError, match="ROUND must be"):
        resolve_mode("again", found, sizes_given=False)


def test_the_pipeline_names_the_same_record():
    from cachecraft_lib.report import pipeline

    assert pipeline.RECORD_SUFFIXES == round_replay.RECORD_SUFFIXES
