"""A measuring profile's plan needs at least 4 selection-half contexts per task (issue 56 item 3): the cpu boards
notebook 08 searches give that, and a plan with fewer is refused (smoke is exempt and stays small)."""

from __future__ import annotations

import pytest
from test_preregister_comparators import _plan

from cachecraft_lib.arena.boards.boards import load_boards
from cachecraft_lib.search import selection


def _halves(board) -> selection.DevHalves:
    return selection.split_dev(selection.dev_context_ids(board), selection.SPLIT_SEED)


@pytest.mark.parametrize("name", ["A", "B_offline"])
def test_the_cpu_boards_notebook_08_searches_give_four_contexts_per_task_in_each_half(name):
    halves = _halves(load_boards("cpu")[name])
    assert min(selection.per_task(halves.selection).values()) >= selection.MIN_PER_TASK
    assert min(selection.per_task(halves.search).values()) >= selection.MIN_PER_TASK
    plan = _plan(board=name, profile="cpu", selection_contexts=list(halves.selection))
    assert plan.selection_per_task >= 4


def test_a_cpu_plan_with_a_thin_selection_half_is_refused_and_smoke_is_not():
    thin = [f"1024/{t}/{i}" for t in ("vt", "qa_1") for i in range(3)] + ["1024/niah_single_1/0"]
    with pytest.raises(selection.SelectionTooSmall, match="at least 4 per task"):
        _plan(profile="cpu", selection_contexts=thin)
    assert _plan(profile="smoke", selection_contexts=thin).selection_per_task == 1  # recorded, not refused
    assert _plan(profile="cpu").selection_per_task is None  # not given: nothing claimed
