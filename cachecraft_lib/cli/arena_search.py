"""``cachecraft arena submit-search RUN``: a search run's best program through the arena, like anyone's entry."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

SUBMIT_SEARCH_HELP = ("submit a search run's best program (`cachecraft evolve`'s output folder): convert it to a "
                      "submission folder, score it on the board's dev items, write its DESCRIPTION.md from facts "
                      "(lineage of edits, dev numbers, the rule judge's nearest prior art), then `arena submit` it "
                      "(hidden test items, gate, points; the ledger records the run id, seed and iterations) and "
                      "record the rule judge's review")


def _cmd_submit_search(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.boards.splits import load_secret
    from ..search.submit import prepare, submit

    arena = Arena(args.profile, Path(args.root) if args.root else None)
    arena.board(args.board)
    out = Path(args.out) if args.out else arena.root / "search_submissions" / Path(args.run).name
    prepared = prepare(args.run, out, args.board, arena, name=args.name)
    gain = prepared.dev.get("gain")
    print(f"wrote {out} ({len(prepared.edits)} edits from the seed); dev: overall "
          f"{prepared.dev['scores'][prepared.dev['method']]['overall']:.3f}"
          + (f", gain over {gain['over']} {gain['point']:+.3f} [{gain['lo']:+.3f}, {gain['hi']:+.3f}]" if gain else ""))
    if args.dev_only:
        return 0
    limits = {"allow_weak": True} if args.allow_weak_sandbox else {}
    entry = submit(prepared, args.board, arena, load_secret(), args.round, judge=not args.no_judge, **limits).entry
    if entry.get("rejected"):
        print(f"rejected ({entry['kind']}): {entry['message']} (recorded in the ledger)")
        return 1
    print(f"{entry['name']} on {args.board}: overall {entry['overall']:.3f} [{entry['lo']:.3f}, {entry['hi']:.3f}], "
          f"gain over {entry['best_before']} {entry['gain']:+.3f} [{entry['gain_lo']:+.3f}, {entry['gain_hi']:+.3f}]; "
          f"{'moves the board' if entry['moved'] else 'does not move the board'}; points {entry['points']:g}; "
          f"origin {entry.get('origin')}")
    if prepared.review is not None:
        r = prepared.review
        print(f"rule judge: novelty {r.novelty}, effectiveness {r.effectiveness}, soundness {r.soundness}, "
              f"flags {', '.join(r.flags) or 'none'}")
    return 0


def add_submit_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``submit-search`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("submit-search", _cmd_submit_search, SUBMIT_SEARCH_HELP)
    p.add_argument("run", help="a search run folder (written by `cachecraft evolve`, with best/best_program.py)")
    p.add_argument("--board", required=True, help="board name (A, B_online, B_offline)")
    p.add_argument("--name", help="the entry's name (default search-<seed>-<random seed>)")
    p.add_argument("--out", help="where to write the submission folder (default <root>/search_submissions/<run>)")
    p.add_argument("--round", type=int, default=1)
    p.add_argument("--dev-only", action="store_true", help="write the folder and score it on dev items; submit nothing")
    p.add_argument("--no-judge", action="store_true", help="skip the rule judge's review after the submission")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run even where the sandbox cannot set up its OS boundary (weaker; the entry records it)")
    return p
