"""A study's seeds side by side (search.seed_workers): two spawned workers write the very run folders, controls and
picks that one process writes step after step; a failed step stops the study naming its seed and step."""

from __future__ import annotations

from concurrent.futures import Future

import pandas as pd
import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.search import selection
from cachecraft_lib.search.seed_workers import StudySettings, _result, default_workers, seed_study

RUN_FILES = ("evolution_trace.jsonl", "generations.csv", "best/best_program.py", "run_info.txt",
             "selected/program.py", "selected/shortlist.csv", "selected/selected.json")


def settings(tmp_path, out: str) -> StudySettings:
    root = tmp_path / "arena"  # one arena folder: its dev baselines computed by the first study, read by the second
    arena = Arena("smoke", root, progress=False)
    halves = selection.split_dev(arena.items(arena.board("A"), "dev"), selection.SPLIT_SEED)
    return StudySettings("A", "v1", "smoke", str(root), tuple(halves.search), tuple(halves.selection),
                         generations=1, population=2, top_k=2, out=str(tmp_path / out))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_two_workers_write_what_one_process_writes(tmp_path):
    here = seed_study(settings(tmp_path, "here"), [0, 1], workers=1)
    pooled = seed_study(settings(tmp_path, "pool"), [0, 1], workers=2)
    assert list(pooled) == [0, 1]
    for s in (0, 1):
        a, b = here[s], pooled[s]
        assert a.budget == b.budget and a.budget >= 1
        for run_a, run_b in ((a.run, b.run), (a.control, b.control)):
            assert run_a.relative_to(tmp_path / "here") == run_b.relative_to(tmp_path / "pool")
            for name in RUN_FILES:
                assert (run_a / name).read_text() == (run_b / name).read_text(), (s, run_a.name, name)
        for pick_a, pick_b in ((a.chosen, b.chosen), (a.control_chosen, b.control_chosen)):
            assert (pick_a.child_id, pick_a.code, pick_a.estimate) == (pick_b.child_id, pick_b.code, pick_b.estimate)
            pd.testing.assert_frame_equal(pick_a.shortlist, pick_b.shortlist)
    assert (here[0].run / RUN_FILES[0]).read_text() != (here[1].run / RUN_FILES[0]).read_text()  # seeds differ


def test_a_failed_step_stops_with_its_seed_and_step_and_cancels_the_rest():
    failed, waiting = Future(), Future()
    failed.set_exception(OSError("the sandbox could not start"))
    with pytest.raises(RuntimeError, match=r"random seed 3's control failed .*OSError: the sandbox could not start"
                                           r".*finished runs are in their folders"):
        _result(failed, "control", 3, {waiting: ("search", 4)})
    assert waiting.cancelled()


def test_seeds_and_workers_are_checked(tmp_path):
    study = StudySettings("A", "v1", "smoke", str(tmp_path), (), (), 1, 2, 2, str(tmp_path))
    with pytest.raises(ValueError, match="distinct random seeds"):
        seed_study(study, [1, 1])
    with pytest.raises(ValueError, match="at least 1"):
        seed_study(study, [1, 2], workers=0)
    assert default_workers(1) == 1 and 1 <= default_workers(5) <= 5
