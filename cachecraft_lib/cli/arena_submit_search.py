"""``cachecraft arena submit-search RUN...``: a search run's chosen program submitted, its pre-registration checked
first and its claim printed after (the search: ``arena_search``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SUBMIT_SEARCH_HELP = ("submit search runs' chosen programs (`cachecraft arena search`'s run folders: the selection "
                      "half's choice, else best/best_program.py): refuse a run whose plan was not recorded in the "
                      "ledger before it started unless --exploratory, convert, score on the dev items, write "
                      "DESCRIPTION.md from facts, `arena submit` it (hidden test items, gate, points; the ledger "
                      "records the run, its plan or the exploratory label) and record the rule judge's review; "
                      "with several runs (one per random seed), report how many beat FRC and the pooled gain")
def _print_entry(entry: dict, board: str, review: Any) -> None:
    print(f"{entry['name']} on {board}: overall {entry['overall']:.3f} [{entry['lo']:.3f}, {entry['hi']:.3f}], "
          f"gain over {entry['best_before']} {entry['gain']:+.3f} [{entry['gain_lo']:+.3f}, {entry['gain_hi']:+.3f}]; "
          f"{'moves the board' if entry['moved'] else 'does not move the board'}; points {entry['points']:g}; "
          f"origin {entry.get('origin')}")
    if review is not None:
        print(f"rule judge: novelty {review.novelty}, effectiveness {review.effectiveness}, soundness "
              f"{review.soundness}, flags {', '.join(review.flags) or 'none'}")


def _picks(args: argparse.Namespace, arena: Any, author: str, run: str) -> list[tuple[str, str] | None]:
    """What to submit from ``run``: its selection-half choice (``<run>/selected/``) or, without one, its best
    (``None``: best/best_program.py); with ``--top K`` its K best distinct programs, as many as the author's
    rate limit lets through now (the rest are named, not submitted)."""
    from ..search.selection import read_selected
    from ..search.submit import top_children

    if args.top <= 1:
        chosen = read_selected(run)
        return [(chosen[0], chosen[1])] if chosen else [None]
    picks = top_children(run, args.top)
    room = len(picks) if args.dev_only else arena.ledger.quota(author)
    if room < len(picks):
        print(f"the rate limit lets {author} submit {room} more now: {', '.join(c for c, _ in picks[room:])} "
              "left out (use `--dev-only` to score them on the dev items)")
    return picks[:room]


def _registration(args: argparse.Namespace, events: list[dict], run: str) -> Any:
    """The run's pre-registration (``preregister.check_registration``); None, with the reason printed, when the
    run is refused."""
    from ..search.preregister import EXPLORATORY, NotPreregistered, check_registration
    from ..search.submit import run_origin

    try:
        reg = check_registration(events, run, run_origin(run)["run_id"], exploratory=args.exploratory)
    except NotPreregistered as err:
        print(f"refused {Path(run).name}: {err}. A finding needs its plan in the ledger before the run starts "
              "(`cachecraft arena search --preregister`); to submit anyway, label it `--exploratory` (recorded "
              "with the entry)", file=sys.stderr)
        return None
    if reg.label == EXPLORATORY:
        print(f"EXPLORATORY (not pre-registered) {Path(run).name}: {reg.reason}")
        return reg
    broken = _choice_broken(args, reg, run)
    if broken:
        print(f"refused {Path(run).name}: {broken}. A pre-registered run submits the one program its plan's rule "
              "chose; to submit another, label it `--exploratory`", file=sys.stderr)
        return None
    return reg


def _choice_broken(args: argparse.Namespace, reg: Any, run: str) -> str:
    """Why a pre-registered run's submission is not its plan's pick or round, or '' (``selection.selection_broken``)."""
    from ..search.selection import selection_broken

    if args.dev_only:
        return ""  # dev items only: no test look to protect
    if args.top > 1:
        return f"--top {args.top} submits programs the plan's rule did not choose"
    planned = reg.plan_event["payload"].get("round")
    if getattr(args, "round", 1) != planned:
        return f"--round {getattr(args, 'round', 1)} is not the plan's round {planned}"
    return selection_broken(run, int(reg.plan_event["payload"].get("top_k") or 1))


def _cmd_submit_search(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.boards.splits import load_secret

    arena = Arena(args.profile, Path(args.root) if args.root else None)
    arena.board(args.board)
    events = arena.ledger.events()
    registrations = {run: _registration(args, events, run) for run in args.run}
    if any(r is None for r in registrations.values()):
        return 2  # before any secret is read or anything submitted
    secret = None if args.dev_only else load_secret()
    status, names = 0, {}
    for run, reg in registrations.items():
        run_status, name = _submit_run(args, arena, run, reg, secret)
        status = max(status, run_status)
        names[run] = name
    if len(args.run) > 1 and not args.dev_only:
        _report_pool(arena, args.board, names)
    if not args.dev_only:
        _report_looks(arena, args.board, registrations.values())
    return status


def _report_looks(arena: Any, board: str, registrations: Any) -> None:
    """The test looks of each submitted run's plan, per random seed (one each is the plan; the ledger tags every
    look of a search entry with its plan, ``leaderboard.test_looks_by_plan``)."""
    from ..arena.scoring.leaderboard import PLAN_PREFIX, test_looks_by_plan

    plans = {str(r.plan_event["payload"]["plan_hash"])[:PLAN_PREFIX] for r in registrations if r.plan_event}
    looks = test_looks_by_plan(arena.ledger.events())
    looks = looks[(looks.board == board) & looks.plan.isin(plans)]
    if len(looks):
        print("test looks per plan and random seed (a plan, and its family, has one per seed; 'after': after the "
              "entry; 'foreign': other authors' looks at other programs tagged with the plan, not counted):")
        print(looks[["plan", "random_seed", "looks", "after", "foreign", "family_looks", "names"]].to_string(index=False))


def _submit_run(args: argparse.Namespace, arena: Any, run: str, reg: Any, secret: bytes | None) -> tuple[int, Any]:
    """One run's picks prepared (and submitted unless --dev-only); (exit status, the first entry's name)."""
    from ..search.preregister import DEFAULT_AUTHOR
    from ..search.submit import prepare, run_origin, submit

    origin = run_origin(run)  # a pre-registered run's entry is its plan's author's (claim_verdict checks it)
    author = str((reg.plan_event["payload"].get("author") if reg and reg.plan_event else None) or DEFAULT_AUTHOR)
    base = args.name if args.name and len(args.run) == 1 else f"search-{origin['seed']}-{origin['random_seed']}"
    status, first = 0, None
    for rank, child in enumerate(_picks(args, arena, author, run), 1):
        name = base if args.top <= 1 else f"{base}-{rank}"
        out = Path(args.out) / Path(run).name if args.out else arena.root / "search_submissions" / Path(run).name
        out = out if args.top <= 1 else out / name
        prepared = prepare(run, out, args.board, arena, name=name, author=author, child=child,
                           rank=rank if args.top > 1 else None, registration=reg)
        gain = prepared.dev.get("gain")
        print(f"wrote {out} ({len(prepared.edits)} edits from the seed); dev (all contexts, including those the "
              f"search climbed): overall {prepared.dev['scores'][prepared.dev['method']]['overall']:.3f}"
              + (f", gain over {gain['over']} {gain['point']:+.3f} [{gain['lo']:+.3f}, {gain['hi']:+.3f}]"
                 if gain else ""))
        if args.dev_only:
            continue
        limits = {"allow_weak": True} if args.allow_weak_sandbox else {}
        entry = submit(prepared, args.board, arena, secret, args.round, judge=not args.no_judge, **limits).entry
        if entry.get("rejected"):
            print(f"rejected ({entry['kind']}): {entry['message']} (recorded in the ledger)")
            status = 1
            continue
        first = first or entry["name"]
        _print_entry(entry, args.board, prepared.review)
        if reg is not None and reg.plan_event is not None:
            print_claim(arena, args.board, entry["name"], run)
    return status, first


def print_claim(arena: Any, board: str, name: str, run: str) -> bool:
    """The new entry's pre-registration claim checked against the ledger and its run (``verify_claim``)."""
    from ..search.preregister import verify_claim

    events = arena.ledger.events()
    entry = next(e for e in reversed(events) if e["kind"] == "submission"
                 and e["payload"].get("name") == name and e["payload"].get("board") == board)
    verdict = verify_claim(events, entry, run)
    print(f"pre-registration claim of {name}: {'holds' if verdict.verified else 'FAILS'}: {verdict.reason}")
    return verdict.verified


def _report_pool(arena: Any, board: str, names: dict[str, str | None]) -> None:
    """How many runs' entries beat FRC, and the pooled gain (``seed_pool``), when FRC is on the board."""
    from ..arena.scoring.leaderboard import units_loader
    from ..search.seed_pool import pool_seeds
    from ..search.submit import run_origin

    units_of = units_loader(arena.root)
    frc = units_of(board, "frc")
    entries = {run_origin(r)["random_seed"]: n for r, n in names.items() if n}
    if frc is None or not entries:
        print("no pooled result: FRC has no entry (or baseline) on this board in this arena, or no run was scored")
        return
    pool = pool_seeds({s: units_of(board, n) for s, n in entries.items()}, entries, frc, "frc",
                      arena.board(board).gate_threshold)
    print(pool.per_seed.round(4).to_string(index=False))
    print(pool.summary())


def add_submit_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``submit-search`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    from .search_options import BOARD_HELP

    p = verb("submit-search", _cmd_submit_search, SUBMIT_SEARCH_HELP)
    p.add_argument("run", nargs="+", help="search run folder(s) (`cachecraft arena search`'s, or `cachecraft "
                                          "evolve`'s with best/best_program.py); several: one per random seed")
    p.add_argument("--exploratory", action="store_true",
                   help="submit a run whose plan was not recorded before it started; the label is recorded with "
                        "the entry and shown in its DESCRIPTION.md")
    p.add_argument("--board", required=True, help=BOARD_HELP)
    p.add_argument("--name", help="the entry's name (default search-<seed>-<random seed>; with --top, -1, -2, ...)")
    p.add_argument("--top", type=int, default=1, metavar="K",
                   help="submit the run's K best distinct programs (best first), as many as the author's rate "
                        "limit allows now (5 per 24 hours); each entry's origin names its child and rank")
    p.add_argument("--out", help="where to write the submission folder (default <root>/search_submissions/<run>)")
    p.add_argument("--round", type=int, default=1, help="the round whose test items score the entries (a "
                                                         "pre-registered run: its plan's round, else refused)")
    p.add_argument("--dev-only", action="store_true", help="write the folder and score it on dev items; submit nothing")
    p.add_argument("--no-judge", action="store_true", help="skip the rule judge's review after the submission")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run even where the sandbox cannot set up its OS boundary (weaker; the entry records it)")
    return p
