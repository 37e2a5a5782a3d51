"""The arena's evaluations on Ray (``arena/ray_eval.py``): the serial run's dev baselines file and ledger values,
a baseline that raises reported while the others are recorded, a killed worker retried without recomputing a
finished context. On the smoke board A cut to two tasks, one item per task and one budget (2 contexts per split)."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import pytest
from kvpress import BasePress

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.methods.registry import REGISTRY, Method

pytestmark = pytest.mark.slow
SECRET = b"arena-ray-test-secret-4f9c2e81d7a36b05e9d18c74a2f6b3e0"  # no runs or repeats: a strong secret
RAISES = "raises_test"


@dataclass
class _RaisingPress(BasePress):
    """A press that fails half-way through the layers, as a buggy method would."""

    compression_ratio: float = 0.0

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if module.layer_idx == 1:
            raise RuntimeError("test press raised on purpose")
        return keys, values


def _small(arena: Arena, baselines: tuple[str, ...] = ("snapkv", "no_press")) -> Arena:
    """Smoke board A with two tasks, one item per task (2 contexts per split), one budget, one baseline."""
    board = arena.boards["A"]
    arena.boards["A"] = replace(board, budgets=(0.5,), items={"dev": 1, "test": 1}, baselines=baselines,
                                tasks=("niah_single_1", "vt"))
    return arena


def _killing_snapkv(control: Path):
    """SnapKV's press, built in the worker; the worker kills itself (SIGKILL) at its second context, once:
    each build that goes on is logged with the worker's pid (one build per context at one budget)."""
    def build(ratio: float):
        from cachecraft_lib.methods.registry import make_press

        builds = control / f"builds-{os.getpid()}"
        count = len(builds.read_text()) if builds.exists() else 0
        if count == 1:
            try:
                with open(control / "killed", "x") as f:
                    f.write(str(os.getpid()))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        with open(builds, "a") as f:
            f.write("x")
        return make_press("snapkv", ratio)
    return build


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    ray = pytest.importorskip("ray")
    control = tmp_path_factory.mktemp("ray_control")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield control
    ray.shutdown()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The serial path's dev baselines rows and file name, a dev report, ledger payloads and private test values."""
    from cachecraft_lib.arena.board_runner import baseline_contender

    arena = _small(Arena("smoke", tmp_path_factory.mktemp("serial"), progress=False))
    dev = arena.dev_baselines(arena.boards["A"])
    name = next((arena.root / "dev" / "A").glob("baselines-*.parquet")).name
    report = arena.dev("A", baseline_contender("tova"))
    arena.record_baselines("A", SECRET)
    return dev, _ledger(arena), _private(arena), name, report


def _ledger(arena: Arena) -> dict[str, dict]:
    return {e["payload"]["name"]: {k: v for k, v in e["payload"].items() if k != "time"}
            for e in arena.ledger.events() if e["kind"] == "baseline"}


def _private(arena: Arena) -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_parquet(p) for p in sorted((arena.root / "private").glob("round1/A/*.parquet"))}


def test_ray_baselines_and_dev_equal_the_serial_run(ray_cluster, serial, tmp_path):
    from cachecraft_lib.arena.board_runner import baseline_contender
    from cachecraft_lib.arena.ray_eval import RayArena, ray_baselines, ray_dev

    dev, ledger, private, name, serial_report = serial
    with _small(RayArena("smoke", tmp_path, progress=False, contexts_per_chunk=1)) as arena:
        out = ray_baselines(arena, ["A"], SECRET)
        report = ray_dev(arena, "A", baseline_contender("tova"))
    assert out["A"][1] == {} and report["failed_baselines"] == {}
    assert _ledger(arena) == ledger  # the same ledger values (eligibility, intervals) ...
    assert _private(arena).keys() == private.keys()
    for baseline, units in private.items():  # ... and the same private per-context test values
        pd.testing.assert_frame_equal(_private(arena)[baseline], units)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "dev" / "A" / name), dev)  # the serial file, same name
    pd.testing.assert_frame_equal(report["scores"], serial_report["scores"])  # `arena dev` reports the same
    assert (report["best_baseline"], report["gain"]) == (serial_report["best_baseline"], serial_report["gain"])
    assert not any(tmp_path.rglob("ray-parts/*"))  # parts are removed once a board is recorded


def test_a_raising_baseline_is_reported_and_the_others_are_recorded(ray_cluster, serial, tmp_path, monkeypatch):
    from cachecraft_lib.arena.ray_eval import RayArena, ray_baselines

    monkeypatch.setitem(REGISTRY, RAISES, Method(RAISES, lambda r: _RaisingPress(r), "raises on purpose",
                                                 arena_baseline=True))
    with _small(RayArena("smoke", tmp_path, progress=False), ("snapkv", RAISES, "no_press")) as arena:
        scores, failed = ray_baselines(arena, ["A"], SECRET)["A"]
    assert failed == {RAISES: "RuntimeError: test press raised on purpose"}
    assert sorted(scores.index) == ["no_press", "snapkv"]
    assert _ledger(arena) == serial[1]  # recorded as if the raising baseline had not been asked for
    assert any((tmp_path / "private" / "ray-parts" / "A").rglob("baseline-snapkv.parquet"))  # kept for a re-run


def test_a_killed_worker_is_retried_and_recomputes_no_finished_context(ray_cluster, serial, tmp_path):
    from cachecraft_lib.arena.board_runner import Contender
    from cachecraft_lib.arena.boards.items import board_items
    from cachecraft_lib.arena.ray_eval import RayArena

    control = ray_cluster / "kill"
    control.mkdir()
    killer = Contender("snapkv_killing", _killing_snapkv(control))
    with _small(RayArena("smoke", tmp_path, progress=False, contexts_per_chunk=2, workers=1)) as arena:
        board = arena.boards["A"]
        rows = arena.run(board, board_items(board, "dev", arena.model()[1], source="offline"), [killer])
    assert (control / "killed").exists()  # the worker died at its second context ...
    builds = {p.name: len(p.read_text()) for p in control.glob("builds-*")}
    assert sorted(builds.values()) == [1, 1]  # ... its first was kept, its restart computed only the second
    expected = serial[0][serial[0].method.isin(["no_press", "snapkv"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(rows.replace({"method": {killer.name: "snapkv"}}), expected)


def test_a_crashing_submission_is_reported_as_on_the_serial_path(ray_cluster, tmp_path):
    from cachecraft_lib.arena.board_runner import submission_contender
    from cachecraft_lib.arena.ray_eval import RayArena, ray_dev
    from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission

    crash = submission_contender(load_submission(Path(__file__).parent / "assets" / "arena" / "crash"))
    with _small(RayArena("smoke", tmp_path, progress=False)) as arena, pytest.raises(SubmissionError) as err:
        ray_dev(arena, "A", crash)  # the CLI's guard reports it in one line, as without --ray
    assert err.value.kind == "crash"
    assert list((tmp_path / "dev" / "A").glob("baselines-*.parquet"))  # the baselines' dev results are kept
    assert not any((tmp_path / "dev" / "A" / "ray-parts").rglob("submission-*"))  # its partial rows are not
