"""The grid on Ray and per-cell failures: Ray gives the serial run's result files; a worker killed mid-group
resumes without recomputing an answer; a press that raises fails its own cell only (with and without Ray)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from kvpress import BasePress

from cachecraft_lib.grid import Cell, grid_cells, run_grid
from cachecraft_lib.grid.cost import PAPER_SHAPES, makespan, paper_grid_estimate, rows_per_batch
from cachecraft_lib.grid.ray_runner import INSTALL_HINT, RayMissing, require_ray, task_resources
from cachecraft_lib.grid.store import CellStore
from cachecraft_lib.methods.registry import REGISTRY, Method
from cachecraft_lib.profiles import EMBEDDED_MODEL, get_profile

SMALL = dict(samples_per_task=2, ruler_source="offline", tasks=("niah_single_1", "vt"), max_new_tokens=6)
RAISES = "raises_test"


@dataclass
class _RaisingPress(BasePress):
    """A press that fails half-way through the layers, as a buggy policy would."""

    compression_ratio: float = 0.0

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        if module.layer_idx == 1:
            raise RuntimeError("test press raised on purpose")
        return keys, values


RAISING = Method(RAISES, lambda r: _RaisingPress(r), "a test press that raises")


def _predictions(folder: Path) -> dict[str, tuple]:
    """Per finished cell: its answers, scores and KVPress predictions.csv (no timestamps or timings)."""
    out = {}
    for path in sorted(folder.glob("*/result.json")):
        result = json.loads(path.read_text())
        answers = [(p["index"], p["predicted_answer"]) for p in result["predictions"]]
        out[path.parent.name] = (answers, result["scores"], result["fingerprint"],
                                 (path.parent / "predictions.csv").read_text())
    return out


# ---------------------------------------------------------------------------------------- without Ray
@pytest.mark.slow
def test_raising_press_fails_its_cell_and_the_others_match_a_run_without_it(tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, RAISES, RAISING)
    good = [Cell(EMBEDDED_MODEL, 1024, "no_press", 0.0, **SMALL), Cell(EMBEDDED_MODEL, 1024, "snapkv", 0.5, **SMALL)]
    bad = Cell(EMBEDDED_MODEL, 1024, RAISES, 0.5, **SMALL)
    summary = run_grid([good[0], bad, good[1]], tmp_path / "with", progress=False)
    assert sorted(summary.method) == ["no_press", "snapkv"]
    assert summary.attrs["failed"] == {bad.key: "RuntimeError: test press raised on purpose (sample 0)"}
    record = json.loads((tmp_path / "with" / bad.key / "failed.json").read_text())
    assert record["sample"] == 0 and "in compress" in record["traceback"]
    assert not (tmp_path / "with" / bad.key / "result.json").exists()
    run_grid(good, tmp_path / "without", progress=False)
    assert _predictions(tmp_path / "with") == _predictions(tmp_path / "without")  # good cells unchanged

    mtimes = {c.key: (tmp_path / "with" / c.key / "result.json").stat().st_mtime_ns for c in good}
    again = run_grid([good[0], bad, good[1]], tmp_path / "with", progress=False)  # the failed cell is retried
    assert list(again.attrs["failed"]) == [bad.key]
    assert mtimes == {c.key: (tmp_path / "with" / c.key / "result.json").stat().st_mtime_ns for c in good}


def test_torn_partial_line_costs_only_itself(tmp_path):
    store, cell = CellStore(tmp_path), Cell(EMBEDDED_MODEL, 1024, "snapkv", 0.5, **SMALL)
    store.append(cell, "fp", {"index": 0, "predicted_answer": "a", "seconds": 0.1})
    with open(store.folder(cell) / "partial.jsonl", "a") as f:
        f.write('{"index": 1, "predicted_ans')  # the writer was killed here
    store.append(cell, "fp", {"index": 2, "predicted_answer": "c", "seconds": 0.1})
    assert sorted(store.partial(cell, "fp")) == [0, 2]


def test_ray_missing_says_how_to_install(monkeypatch, capsys):
    from cachecraft_lib.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayMissing, match=r"pip install -e \"\.\[ray\]\""):
        require_ray()
    assert main(["grid", "--profile", "smoke", "--ray", "--out", "unused"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err


def test_task_resources_one_gpu_on_cuda_else_cpus():
    assert task_resources("cuda", {"CPU": 16, "GPU": 8}, 2) == {"num_gpus": 1, "num_cpus": 2}
    assert task_resources(None, {"CPU": 16, "GPU": 8}, 1) == {"num_gpus": 1, "num_cpus": 1}
    assert task_resources(None, {"CPU": 16}, 4) == {"num_cpus": 4}
    assert task_resources("cpu", {"CPU": 16, "GPU": 8}, 2) == {"num_cpus": 2}
    with pytest.raises(ValueError, match="no GPU"):
        task_resources("cuda", {"CPU": 16}, 1)


def test_paper_estimate_batches_by_kept_length_and_ray_is_bound_by_groups(ruler_1024, tokenizer):
    table = paper_grid_estimate(ruler_1024, tokenizer, gpus=(1, 4, 8))
    by = table.set_index(["model", "length"])
    assert (by.xs(4096, level="length").batches == 1).all()  # 31 rows of 4096 tokens fit a third of 141 GB
    assert (by.xs(8192, level="length").batches == 2).all()  # ... of 8192 tokens do not: two batches
    assert (by.xs(8192, level="length").padded_kept < 1).all()  # the compressed rows' batch is padded less
    assert rows_per_batch(PAPER_SHAPES[0], 8192, 31) == 18  # (141 - 16 - 3.2) GB / 3 over 2 x 1.07 GB per row
    hours = list(table.gpu_hours)
    assert table.attrs["ray"]["1 GPU(s)"] == pytest.approx(sum(hours), abs=0.1)
    assert table.attrs["ray"]["8 GPU(s)"] == max(hours)  # one task per group: 4 groups use 4 of 8 GPUs
    assert makespan([3, 3, 2, 2], 2) == 5 and makespan([4, 1, 1], 2) == 4


def test_estimate_command_prints_hours_for_n_gpus(capsys):
    from cachecraft_lib.cli import main

    assert main(["grid", "--estimate", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert "8 GPU(s)" in out and "with --ray" in out and "estimate" in out


# ------------------------------------------------------------------------------------------- on Ray
def _cachecraft_grid_ray(out: Path) -> list[str]:
    """The smoke grid on a local Ray cluster; each (model, length) task asks for every CPU Ray sees, so the
    two groups run one after the other and the second is still running when the first one's cells finish."""
    from ray._private.utils import get_num_cpus

    return [str(Path(sys.executable).parent / "cachecraft"), "grid", "--profile", "smoke", "--ray", "--out",
            str(out), "--cpus-per-task", str(get_num_cpus())]


# Ray waits 10 s by default for its node to register, then the grid fails to start: on a loaded machine (the
# suite beside other jobs) that is a race, so the runs here wait as long as it takes (bounded against a hang).
SLOW_START = {**os.environ, "RAY_raylet_start_wait_time_s": "300"}


def _finished(out: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/result.json")}


def _as_in_a_terminal() -> None:
    """A command typed in a terminal has Ctrl-C's default action; a test suite started in the background by a
    non-interactive shell inherits SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_after_first_group(out: Path, log: Path) -> tuple[subprocess.Popen, dict[str, int], list]:
    """Start the Ray grid, send SIGINT to its process group (a terminal's Ctrl-C) once the first cells are
    finished; returns the process, the cells finished when the signal was sent, and the Ray processes it had
    started. It waits on state (a cell's result.json, the process's exit), with bounds only against a hang."""
    psutil = pytest.importorskip("psutil")
    with open(log, "w") as f:
        proc = subprocess.Popen(_cachecraft_grid_ray(out), stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                env=SLOW_START, preexec_fn=_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 900
        while not _finished(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None and _finished(out), log.read_text()[-2000:]
        ray_procs = psutil.Process(proc.pid).children(recursive=True)
        assert any("raylet" in " ".join(p.cmdline()) for p in ray_procs)  # a local cluster is up
        at_signal = _finished(out)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, at_signal, ray_procs


@pytest.mark.slow
def test_ctrl_c_cancels_cleanly_leaves_no_ray_process_and_a_rerun_resumes(tmp_path):
    """SIGINT to the process group (a terminal's Ctrl-C) once the first group's cells are finished."""
    pytest.importorskip("ray")
    psutil = pytest.importorskip("psutil")
    cells = grid_cells(get_profile("smoke"))
    out, log = tmp_path / "grid", tmp_path / "run.log"
    proc, at_signal, ray_procs = _interrupt_after_first_group(out, log)
    text = log.read_text()
    assert 0 < len(at_signal) < len(cells)  # the signal came while cells were left to compute
    assert proc.returncode not in (0, -signal.SIGKILL), text[-2000:]  # it ended itself, and not as a success
    assert "interrupted: Ray tasks cancelled; finished cells are saved" in text, text[-2000:]
    _, alive = psutil.wait_procs(ray_procs, timeout=120)  # returns as soon as they are all gone
    assert not alive, [(p.pid, " ".join(p.cmdline())[:80]) for p in alive]  # no Ray process left behind

    finished = _finished(out)
    assert {k: finished.get(k) for k in at_signal} == at_signal  # what was saved stays saved, untouched
    again = subprocess.run(_cachecraft_grid_ray(out), capture_output=True, text=True, timeout=900, env=SLOW_START)
    assert again.returncode == 0, again.stderr[-2000:]
    after = _finished(out)
    assert sorted(after) == sorted(c.key for c in cells)
    assert {k: after[k] for k in finished} == finished  # the finished cells were not recomputed


def _worker_hook(control: str):
    """Run in every Ray worker: registers the raising press, logs every answer appended to the store, and
    makes a worker kill itself (SIGKILL) before its decode number ``kill_after`` + 1, once per test."""
    def setup() -> None:
        from cachecraft_lib.grid import runner, store
        from cachecraft_lib.methods.registry import (
            REGISTRY as registry,  # the worker's own, not a pickled copy
        )

        registry[RAISES] = RAISING
        folder, real_decode, real_append, calls = Path(control), runner.decode_rows, store.CellStore.append, {}

        def decode_rows(model, tokenizer, rows, *args, **kwargs):
            kill = folder / "kill_after"
            if kill.exists():
                key = kill.stat().st_mtime_ns
                calls[key] = calls.get(key, 0) + 1
                if calls[key] > int(kill.read_text()):
                    try:
                        with open(folder / "killed", "x") as f:  # only the first worker to get here dies
                            f.write(str(os.getpid()))
                    except FileExistsError:
                        pass
                    else:
                        os.kill(os.getpid(), signal.SIGKILL)
            return real_decode(model, tokenizer, rows, *args, **kwargs)

        def append(self, cell, fp, record):
            real_append(self, cell, fp, record)
            with open(folder / "answers.log", "a") as f:
                f.write(f"{self.root.name} {cell.key} {record['index']} {os.getpid()}\n")

        runner.decode_rows, store.CellStore.append = decode_rows, append
    return setup


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    ray = pytest.importorskip("ray")
    control = tmp_path_factory.mktemp("ray_control")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": _worker_hook(str(control))})
    yield control
    ray.shutdown()


@pytest.fixture(scope="module")
def serial_smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    run_grid(grid_cells(get_profile("smoke")), out, progress=False)
    return _predictions(out)


def _answers(control: Path, folder: Path) -> list[tuple[str, int, int]]:
    lines = (control / "answers.log").read_text().split("\n") if (control / "answers.log").exists() else []
    return [(k, int(i), int(pid)) for name, k, i, pid in (line.split() for line in lines if line)
            if name == folder.name]


@pytest.mark.slow
def test_ray_smoke_grid_equals_serial_and_a_raising_press_stops_only_itself(ray_cluster, serial_smoke, tmp_path):
    from cachecraft_lib.grid.ray_runner import run_grid_ray

    cells = grid_cells(get_profile("smoke"))
    bad = replace(cells[0], method=RAISES, ratio=0.5)
    summary = run_grid_ray([*cells, bad], tmp_path / "ray", device="cpu", dtype="float32", progress=False)
    assert _predictions(tmp_path / "ray") == serial_smoke  # the raising cell never joined a batch
    assert len(summary) == len(cells)
    assert summary.attrs["failed"] == {bad.key: "RuntimeError: test press raised on purpose (sample 0)"}


@pytest.mark.slow
def test_killed_worker_is_retried_and_recomputes_no_finished_answer(ray_cluster, serial_smoke, tmp_path):
    from cachecraft_lib.grid.ray_runner import run_grid_ray

    control, out = ray_cluster, tmp_path / "killed"
    (control / "kill_after").write_text("2")  # a worker dies decoding its third sample (two kept per cell)
    cells = grid_cells(get_profile("smoke"))
    summary = run_grid_ray(cells, out, device="cpu", dtype="float32", max_retries=2, progress=False)
    (control / "kill_after").unlink()
    assert (control / "killed").exists()
    dead = int((control / "killed").read_text())
    assert len(summary) == len(cells) and summary.attrs["failed"] == {}
    answers = _answers(control, out)
    assert any(pid == dead for *_, pid in answers)  # answers were kept from the killed worker...
    assert len({(k, i) for k, i, _ in answers}) == len(answers)  # ...and none was answered twice
    assert _predictions(out) == serial_smoke  # the resumed group gives the serial run's files

    mtimes = {c.key: (out / c.key / "result.json").stat().st_mtime_ns for c in cells}
    run_grid_ray(cells, out, device="cpu", dtype="float32", progress=False)
    assert len(_answers(control, out)) == len(answers)  # a finished grid recomputes nothing
    assert mtimes == {c.key: (out / c.key / "result.json").stat().st_mtime_ns for c in cells}


def test_ctrl_c_in_any_verb_ends_with_one_line_and_status_130(monkeypatch, capsys):
    """The CLI turns KeyboardInterrupt into 'interrupted' and exit 130, not a traceback (any verb, Ray or not)."""
    from cachecraft_lib import cli

    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.build_parser()
    args = parser.parse_args(["grid", "--profile", "smoke"])
    monkeypatch.setattr(cli, "build_parser", lambda: type("P", (), {"parse_args": lambda self, argv: args})())
    args.func = interrupted
    assert cli.main([]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
