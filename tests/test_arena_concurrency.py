"""Two ``arena submit`` at once, in two real processes: each is gated against the board's best at the moment it is
recorded (the second against the first, not both against the same old best) and the ledger stays one chain.

Each process runs ``recording.record_submission`` (what ``Arena.submit`` calls once the method has run) on the
same arena folder with equal per-unit values, clearly better than the baseline. The first is paused inside the
gate (it has read the best, not yet appended); while it is, the test checks that the arena's lock is held (a
non-blocking ``flock`` fails) and that the second has started but not reached the gate, then lets the first go.
Without the lock both would read the baseline as the best and both would move the board."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.arena import Arena

SECRET = hashlib.sha256(b"cachecraft tests: concurrency secret").hexdigest().encode()
CHILD = textwrap.dedent("""
    import sys, time, json
    from pathlib import Path
    from types import SimpleNamespace
    import pandas as pd
    from cachecraft_lib.arena import recording
    from cachecraft_lib.arena.arena import Arena

    root, me, pause = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "pause"
    (root / f"{me}.started").touch()
    real_gate = recording.gate

    def gate(*args, **kwargs):  # between reading the best and appending: the window the lock must cover
        (root / f"{me}.in_gate").touch()
        while pause and not (root / "go").exists():
            time.sleep(0.02)
        return real_gate(*args, **kwargs)

    recording.gate = gate
    arena = Arena("smoke", root / "arena", progress=False)
    units = pd.read_parquet(root / "units.parquet").assign(method=f"mine-{me}")
    units.attrs["excluded_tasks"] = []
    sub = SimpleNamespace(name=f"mine-{me}", author=f"author-{me}", author_key=f"author-{me}", code_sha256=me * 8)
    entry = recording.record_submission(arena.ledger, arena.root, arena.boards["A"], sub, units, 1, "frozen_bar",
                                        {"sandbox": "test"})
    print(json.dumps({"best_before": entry.best_before, "moved": entry.moved, "gain": entry.gain}))
""")


def _units(value: float, n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    terms = {t: 0.5 for t in ("accuracy", "memory", "memory_physical", "speed")}
    return pd.DataFrame({"context_id": [f"c{i}" for i in range(n)], "task": ["niah_single_1", "vt"] * (n // 2),
                         **terms, "overhead": 0.0, "overhead_ratio": 0.0, "generated": 0.0,
                         "overall": value + rng.normal(0, 0.01, n)})


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Wait on the child's state (a file it writes), failing if it died first."""
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.communicate()}")
        time.sleep(0.02)


@pytest.fixture()
def arena_with_a_baseline(tmp_path) -> Path:
    """Round 1 and one eligible baseline (snapkv) with its per-unit values, through the ledger's own API."""
    from cachecraft_lib.arena import recording

    arena = Arena("smoke", tmp_path / "arena", progress=False)
    arena.ensure_round(SECRET, 1)
    base = _units(0.40).assign(method="snapkv")
    recording.save_units(base, arena._private(1, "A", "baseline-snapkv"))
    arena.ledger.append("baseline", {"board": "A", "name": "snapkv", "author": "baseline", "kind": "baseline",
                                     "round": 1, "overall": 0.40, "lo": 0.39, "hi": 0.41, "accuracy": 0.5,
                                     "memory": 0.5, "speed": 0.5, "eligible": True, "moved": True})
    _units(0.60).to_parquet(tmp_path / "units.parquet")  # both submissions: equal, +0.2 over the baseline
    return tmp_path


def test_two_submits_at_once_are_gated_one_after_the_other(arena_with_a_baseline):
    root = arena_with_a_baseline
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def start(me: str, pause: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CHILD, str(root), me, pause], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = start("a", "pause")
    _wait_for(root / "a.in_gate", first)  # the first has read the best and holds its decision
    second = start("b", "go")
    _wait_for(root / "b.started", second)
    with open(root / "arena" / "ledger.jsonl.lock", "a") as f:  # the window is locked: nobody else may decide
        with pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not (root / "b.in_gate").exists()  # the second waits for the lock, not for the gate
    (root / "go").touch()
    out = {}
    for me, proc in (("a", first), ("b", second)):
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        out[me] = json.loads(stdout.splitlines()[-1])
    assert out["a"]["best_before"] == "snapkv" and out["a"]["moved"]
    assert out["b"]["best_before"] == "mine-a" and not out["b"]["moved"]  # gated against the first, recorded
    events = Arena("smoke", root / "arena", progress=False).ledger.events()  # one chain, every line verified
    kinds = [e["kind"] for e in events]
    assert kinds == ["round", "baseline", "submission", "points", "submission", "points"]
    assert [e["seq"] for e in events] == list(range(6))
