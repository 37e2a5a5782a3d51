"""`cachecraft arena search --preregister` records the plan the run really follows (issue 56): the controls it
will run, the pass criteria against what it compares, and the selection half it checked; and it reserves room for
one entry per seed before anything runs."""

from __future__ import annotations

import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.cli import arena_search
from cachecraft_lib.search import dev_only


class Stop(Exception):
    """Raised where the searches would start: the plan is written by then."""


@pytest.fixture
def plan_of(monkeypatch, tmp_path):
    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(arena_search, "_searches", stop)

    def run(*extra: str) -> dict:
        from cachecraft_lib.cli import build_parser

        root = tmp_path / "arena"
        args = build_parser().parse_args(["arena", "search", "--board", "A", "--profile", "smoke", "--root", str(root),
                                          "--iterations", "2", "--population", "2", "--random-seeds", "0", "1",
                                          "--preregister", *extra])
        try:
            with pytest.raises(Stop):
                arena_search._cmd_search(args)
        finally:
            for guard in list(dev_only._active):  # the CLI leaves its guard in place for the process
                dev_only.uninstall(guard)
        plans = [e for e in Arena("smoke", root).ledger.events() if e["kind"] == "plan"]
        assert len(plans) == 1
        return plans[0]["payload"]

    return run


def test_plan_with_controls_names_random_search_and_its_criterion(plan_of):
    plan = plan_of("--controls")
    assert plan["controls"] == ["random search at the search's budget"]
    against = {c["against"] for c in plan["criteria"]}
    assert against == {"frc", "random search at the search's budget"}  # board A: FRC per seed and per run, random
    assert plan["selection_per_task"] is not None and plan["selection_per_task"] >= 1


def test_plan_without_controls_promises_none(plan_of):
    plan = plan_of()
    assert plan["controls"] == []
    assert {c["against"] for c in plan["criteria"]} == {"frc"}
