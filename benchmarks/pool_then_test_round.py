"""Does a pooled study slow the arena test run that follows it in the same process (notebook 08's order)?

    python benchmarks/pool_then_test_round.py --profile cpu      # about 15 minutes on two cores
    python benchmarks/pool_then_test_round.py --profile smoke    # about a minute

Why: one replay of board A's round with its seeds in two workers (9500431) ran its test round twice as slow per
context as the one-process replay, and the cause was never found. This script times the same arena test run (the
FRC example submitted to board A in a fresh arena, on the test items of one fresh secret, the baselines' test
rows already in memory) before any study, after a small study in two spawned workers, after the same study in
this process, and after the pooled study again, and prints each against the first. Timings only: the study's
own equality with one process is tested in tests/test_seed_workers.py.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cachecraft_lib.arena.arena import Arena  # noqa: E402
from cachecraft_lib.arena.boards import splits  # noqa: E402
from cachecraft_lib.arena.row_cache import shared_rows_folder  # noqa: E402
from cachecraft_lib.search import dev_only, selection  # noqa: E402
from cachecraft_lib.search.seed_workers import StudySettings, seed_study  # noqa: E402

FRC = Path(splits.__file__).parents[1] / "examples" / "frc"


def test_run(profile: str, root: Path, secret_file: Path) -> float:
    """Seconds of the FRC example's submission to board A in a fresh arena (the secret only while it runs)."""
    arena = Arena(profile, root, progress=False, rows_root=shared_rows_folder(profile))
    os.environ[splits.SECRET_FILE_ENV] = str(secret_file)
    try:
        start = time.perf_counter()
        entry = arena.submit(FRC, "A", splits.load_secret())
        assert not entry.get("rejected"), entry
        return time.perf_counter() - start
    finally:
        del os.environ[splits.SECRET_FILE_ENV]


def study(profile: str, scratch: Path, workers: int) -> float:
    """Seconds of a small pre-registered study's dev work (two seeds, one generation of three children)."""
    arena = Arena(profile, scratch / f"study-arena-{time.monotonic_ns()}", progress=False,
                  rows_root=shared_rows_folder(profile))
    start = time.perf_counter()
    with dev_only.dev_only():
        halves = selection.split_dev(arena.items(arena.board("A"), "dev"), selection.SPLIT_SEED)
        settings = StudySettings("A", "v1", profile, str(arena.root), tuple(halves.search), tuple(halves.selection),
                                 1, 3, 2, str(scratch / f"study-{time.monotonic_ns()}"),
                                 rows_root=str(shared_rows_folder(profile)))
        seed_study(settings, [0, 1], workers=workers, arena=arena)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-pool-test-"))
    secret_file = scratch / "secret"
    secret_file.write_text(secrets.token_bytes(32).hex())
    secret_file.chmod(0o600)
    test_run(args.profile, scratch / "arena-baselines", secret_file)  # the baselines' test rows, once
    base = test_run(args.profile, scratch / "arena-before", secret_file)
    print(f"test run before any study: {base:.1f} s (1.00)", flush=True)
    for turn, workers in enumerate((2, 1, 2)):
        took = study(args.profile, scratch, workers)
        after = test_run(args.profile, scratch / f"arena-after-{turn}", secret_file)
        print(f"study in {workers} worker(s) {'(spawned)' if workers > 1 else '(this process)'}: {took:.1f} s; "
              f"test run after it: {after:.1f} s ({after / base:.2f}); load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
