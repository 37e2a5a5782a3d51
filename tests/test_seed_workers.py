"""A study's seeds side by side (search.seed_workers): two spawned workers write the very run folders, controls and
picks that one process writes step after step; a worker runs behind the dev-only guard, without the secret's
variables, on the search's torch threads; a failed step stops the study naming its seed and step."""

from __future__ import annotations

import os
from concurrent.futures import Future

import pandas as pd
import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.search import selection
from cachecraft_lib.search.seed_workers import (
    StudySettings,
    _result,
    default_workers,
    seed_study,
    worker_pool,
)

RUN_FILES = ("evolution_trace.jsonl", "generations.csv", "best/best_program.py", "best/best_program_info.json",
             "run_info.txt", "fitness_contexts.txt", "selected/program.py", "selected/shortlist.csv",
             "selected/selected.json", "selected/selection_units.csv")


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
            assert (run_a / "selected" / "selection_units.csv").is_file()  # what the notebook commits per unit
            for name in RUN_FILES:
                assert (run_a / name).is_file() == (run_b / name).is_file(), (s, run_a.name, name)
                if (run_a / name).is_file():
                    assert (run_a / name).read_text() == (run_b / name).read_text(), (s, run_a.name, name)
        for pick_a, pick_b in ((a.chosen, b.chosen), (a.control_chosen, b.control_chosen)):
            assert (pick_a.child_id, pick_a.code, pick_a.estimate) == (pick_b.child_id, pick_b.code, pick_b.estimate)
            pd.testing.assert_frame_equal(pick_a.shortlist, pick_b.shortlist)
            pd.testing.assert_frame_equal(pick_a.units, pick_b.units)
    assert (here[0].run / RUN_FILES[0]).read_text() != (here[1].run / RUN_FILES[0]).read_text()  # seeds differ


def probe() -> tuple[bool, bool, int]:
    """Run in a worker: is the guard in place, is the secret's variable there, torch's threads."""
    import torch

    from cachecraft_lib.search import dev_only

    return dev_only.active(), splits.SECRET_ENV in os.environ, torch.get_num_threads()


def test_a_worker_starts_behind_the_guard_without_the_secret(monkeypatch):
    monkeypatch.setenv(splits.SECRET_ENV, "00" * 32)  # even were the caller to hold it
    pool = worker_pool(1)
    try:
        assert pool.submit(probe).result(timeout=120) == (True, False, 1)
    finally:
        pool.shutdown()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_a_step_failing_in_a_worker_stops_the_study_with_its_seed_step_and_folder(tmp_path):
    broken = settings(tmp_path, "broken")
    broken = StudySettings(**{**vars(broken), "seed_program": "no_such_seed"})
    with pytest.raises(RuntimeError, match=r"random seed \d's search failed in its worker \(ValueError: unknown "
                                           rf"seed 'no_such_seed'.*finished runs are in {tmp_path / 'broken'}"):
        seed_study(broken, [0, 1], workers=2)


def test_a_failed_step_says_its_seed_step_and_folder_and_a_dead_worker_says_memory():
    from concurrent.futures.process import BrokenProcessPool

    study = StudySettings("A", "v1", "smoke", "arena", (), (), 1, 2, 2, "study-folder")
    failed = Future()
    failed.set_exception(OSError("the sandbox could not start"))
    with pytest.raises(RuntimeError, match=r"random seed 3's control failed .*OSError: the sandbox could not start"
                                           r".*finished runs are in study-folder"):
        _result(failed, "control", 3, study)
    died = Future()
    died.set_exception(BrokenProcessPool("a process terminated abruptly"))
    with pytest.raises(RuntimeError, match=r"a worker died .*often memory: rerun with fewer workers"):
        _result(died, "search", 4, study)


def test_seeds_and_workers_are_checked(tmp_path):
    study = StudySettings("A", "v1", "smoke", str(tmp_path), (), (), 1, 2, 2, str(tmp_path))
    with pytest.raises(ValueError, match="distinct random seeds"):
        seed_study(study, [1, 1])
    with pytest.raises(ValueError, match="at least 1"):
        seed_study(study, [1, 2], workers=0)
    assert default_workers(1) == 1 and 1 <= default_workers(5) <= 5
    assert default_workers(5, "paper") == 1  # one GPU: each worker would hold its own model there
