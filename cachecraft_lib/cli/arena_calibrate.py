"""``cachecraft arena calibrate``: measure budgets that put the best baseline at 0.4-0.9 of the full cache."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..arena.boards.boards import board_help

BOARD_HELP = board_help()


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.board_runner import baseline_contender
    from ..arena.boards.boards import write_budgets
    from ..arena.calibration import CANDIDATES, best_share_intervals, calibrate_board

    arena = Arena(args.profile, Path(args.root) if args.root else None)
    if arena.boards[next(iter(arena.boards))].limits.mode == "absolute" and not args.force:
        print(f"error: profile {args.profile} uses the reference arena's budgets and absolute limits; calibration is for the "
              f"embedded profiles (pass --force to calibrate anyway)", file=sys.stderr)
        return 2
    names = [args.board] if args.board else list(arena.boards)
    chosen, notes = {}, {}
    for name in names:
        board = arena.board(name)
        measured: dict = {}

        def run(b, board=board, measured=measured):
            items = arena.items(board, "dev")
            measured["rows"] = arena.run(b, items, [baseline_contender(x) for x in board.baselines])
            measured["contexts"] = items.context_id.nunique()
            kept = arena.root / "calibration" / f"{board.name}-rows.parquet"  # kept even if no budget fits
            kept.parent.mkdir(parents=True, exist_ok=True)
            measured["rows"].to_parquet(kept)
            print(f"every baseline's rows at every candidate: {kept}")
            return measured["rows"]

        budgets, table = calibrate_board(run, board, tuple(args.candidates or CANDIDATES))
        chosen[name] = budgets
        notes[name] = {"target": [0.4, 0.9], "measured_on": f"dev items ({measured['contexts']} contexts)",
                       "best_accuracy": {f"{k:g}": round(v, 3) for k, v in zip(table.keep, table.best_accuracy,
                                                                                 strict=True)}}
        if board.decode_time:  # board C: the best baseline per cap with its interval, into the calibration block
            shares = best_share_intervals(measured["rows"], board)
            notes[name]["best_share_of_full"] = {f"{r.budget:g}": {"method": r.method, "share": round(r.share, 3),
                                                                     "lo": round(r.lo, 3), "hi": round(r.hi, 3)}
                                                   for r in shares.itertuples()}
            print(shares.to_string(index=False))
        print(f"board {name}:\n{table.to_string(index=False)}\n-> budgets {budgets}")
    if args.dry_run:
        return 0
    print(f"wrote {write_budgets(args.profile, chosen, notes)}")
    return 0


def add_calibrate_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``calibrate`` through ``cli.arena``'s ``verb(name, func, help)``."""
    p = verb("calibrate", _cmd_calibrate, "measure budgets that put the best baseline at 0.4-0.9 of the full cache "
                                          "and write them into the profile's board file")
    p.add_argument("--board", help=BOARD_HELP + " (default: every board)")
    p.add_argument("--candidates", type=float, nargs="+", help="budgets (fractions kept) to try")
    p.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    p.add_argument("--force", action="store_true", help="calibrate a profile with absolute limits too")
    return p
