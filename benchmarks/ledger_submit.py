"""What the ledger costs one ``arena submit`` as an arena's history grows (issue 50).

    python benchmarks/ledger_submit.py [--events 10000] [--submits 3] [--compare OTHER_CHECKOUT]

An arena folder of the smoke profile gets a round, board A's baselines and then filler events up to
``--events`` (signed with the organiser's key, written directly: appending them one by one would itself cost
what is measured). Then ``Arena.submit`` runs ``--submits`` times on ``tests/assets/arena/good_scores`` (a
new author each time, under the rate limit) with the model's work replaced by fixed synthetic rows
(``Arena.items``/``Arena.run`` stubbed): what is timed is everything else a submit does, i.e. the secret's
check against the round, the rate limit, the identity checks, the gate against the board's best, the
appends and the points, which is almost all reading and verifying the signed ledger. Printed: seconds per
submit, the first of a process (its ``Ledger`` verifies the whole history once) and the median of the later
ones (each verifies only the lines added since). ``--compare DIR`` runs the same script with ``DIR`` (another
checkout, e.g. ``git archive`` of an older commit) first on ``PYTHONPATH`` and prints both and the ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SECRET = hashlib.sha256(b"cachecraft benchmark: ledger submit").hexdigest().encode()
EXAMPLE = REPO / "tests" / "assets" / "arena" / "good_scores"


def _rows(items: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Fixed synthetic board rows: every name on every item, scores from a hash of (name, item)."""
    out = []
    for name in names:
        for item in items.itertuples():
            draw = int(hashlib.sha256(f"{name}|{item.item}".encode()).hexdigest()[:8], 16) / 2**32
            out.append({"method": name, "budget": 0.5, "item": item.item, "context_id": item.context_id,
                        "task": item.task, "length": 1000, "score": 100.0 * (draw > 0.3), "predicted_answer": "",
                        "logical_entries": 500, "physical_entries": 500, "full_entries": 1000, "kv_bytes": 0,
                        "full_kv_bytes": 0, "read_entries": 520, "full_read_entries": 1020,
                        "overhead_flops": 0, "prefill_flops": 1})
    return pd.DataFrame(out)


def _stub(arena) -> None:
    items = pd.DataFrame({"item": [f"i{i}" for i in range(24)], "context_id": [f"c{i}" for i in range(24)],
                          "task": ["niah_single_1", "vt"] * 12})
    arena.items = lambda board, split, secret=None, round_=1: items
    arena.run = lambda board, items, contenders: _rows(items, ["no_press", *(c.name for c in contenders)])


def _pad(ledger, total: int) -> None:
    """Filler events up to ``total``, signed like the ledger's own (points events of a past round)."""
    from cachecraft_lib.arena.scoring import signing
    from cachecraft_lib.arena.scoring.ledger import _digest

    key = signing.load_private(ledger.key_path)
    lines = ledger.path.read_text().splitlines()
    prev, seq = json.loads(lines[-1])["hash"], len(lines)
    version = json.loads(lines[-1])["rules_version"]
    with open(ledger.path, "a") as f:
        for i in range(seq, total):
            event = {"seq": i, "time": "2026-01-01T00:00:00+00:00", "kind": "points", "rules_version": version,
                     "payload": {"board": "A", "name": f"old-{i % 97}", "author": f"old-{i % 89}",
                                 "points": 0.0, "rule": "frozen_bar", "round": 0}, "prev": prev}
            event["hash"] = prev = _digest(event)
            event["sig"] = signing.sign(key, event["hash"].encode())
            f.write(json.dumps(event, sort_keys=True) + "\n")
    body = signing.head_body(total, prev, signing.public_hex(key))
    ledger.head_path.write_text(json.dumps({**body, "signature": signing.sign(key, signing.canonical(body))}) + "\n")


def measure(events: int, submits: int) -> list[float]:
    from cachecraft_lib.arena.arena import Arena

    root = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    try:
        arena = Arena("smoke", root / "arena", progress=False)
        _stub(arena)
        arena.record_baselines("A", SECRET)
        _pad(arena.ledger, events)
        times = []
        for i in range(submits):
            folder = root / f"sub{i}"
            shutil.copytree(EXAMPLE, folder)
            (folder / "metadata.yaml").write_text(f"name: bench-{i}\nauthor: bench-author-{i}\nboards: [A]\n")
            start = time.perf_counter()
            entry = arena.submit(folder, "A", SECRET, allow_weak=True)
            times.append(time.perf_counter() - start)
            assert not entry.get("rejected"), entry
        return times
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="ledger events before the submits")
    parser.add_argument("--submits", type=int, default=3, help="submits timed (the median is printed)")
    parser.add_argument("--compare", help="another checkout to time first (its cachecraft_lib on PYTHONPATH)")
    parser.add_argument("--json", action="store_true", help="print the seconds as JSON (used by --compare)")
    args = parser.parse_args()
    if args.compare:
        env = {**os.environ, "PYTHONPATH": str(Path(args.compare).resolve())}
        cmd = [sys.executable, __file__, "--events", str(args.events), "--submits", str(args.submits), "--json"]
        other = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True,
                                          cwd=args.compare).stdout.splitlines()[-1])
        print(f"{args.compare}: {np.round(other, 3).tolist()} s per submit at {args.events} events")
    times = measure(args.events, args.submits)
    if args.json:
        print(json.dumps(times))
        return
    here = statistics.median(times[1:] or times)
    print(f"this checkout at {args.events} events: first submit {times[0]:.3f} s (a new Ledger verifies the whole "
          f"history once), later submits {here:.3f} s (median; all: {np.round(times, 3).tolist()})")
    if args.compare:
        print(f"ratio (other / this), later submits: {statistics.median(other[1:] or other) / here:.1f}x; "
              f"first submit: {other[0] / times[0]:.1f}x")


if __name__ == "__main__":
    main()
