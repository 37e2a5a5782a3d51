"""``cachecraft arena submit-search RUN``: a search run's best program through the arena, like anyone's entry."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

SUBMIT_SEARCH_HELP = ("submit a search run's best program (`cachecraft evolve`'s output folder): convert it to a "
                      "submission folder, score it on the board's dev items, write its DESCRIPTION.md from facts "
                      "(lineage of edits, dev numbers, the rule judge's nearest prior art), then `arena submit` it "
                      "(hidden test items, gate, points; the ledger records the run id, seed and iterations) and "
                      "record the rule judge's review")


def _print_entry(entry: dict, board: str, review: Any) -> None:
    print(f"{entry['name']} on {board}: overall {entry['overall']:.3f} [{entry['lo']:.3f}, {entry['hi']:.3f}], "
          f"gain over {entry['best_before']} {entry['gain']:+.3f} [{entry['gain_lo']:+.3f}, {entry['gain_hi']:+.3f}]; "
          f"{'moves the board' if entry['moved'] else 'does not move the board'}; points {entry['points']:g}; "
          f"origin {entry.get('origin')}")
    if review is not None:
        print(f"rule judge: novelty {review.novelty}, effectiveness {review.effectiveness}, soundness "
              f"{review.soundness}, flags {', '.join(review.flags) or 'none'}")


def _picks(args: argparse.Namespace, arena: Any, author: str) -> list[tuple[str, str] | None]:
    """What to submit: the run's best (``None``: best/best_program.py), or its ``--top K`` best distinct
    programs, as many as the author's rate limit lets through now (the rest are named, not submitted)."""
    from ..search.submit import top_children

    if args.top <= 1:
        return [None]
    picks = top_children(args.run, args.top)
    room = len(picks) if args.dev_only else arena.ledger.quota(author)
    if room < len(picks):
        print(f"the rate limit lets {author} submit {room} more now: {', '.join(c for c, _ in picks[room:])} "
              "left out (use `--dev-only` to score them on the dev items)")
    return picks[:room]


def _cmd_submit_search(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.boards.splits import load_secret
    from ..search.submit import prepare, run_origin, submit

    arena = Arena(args.profile, Path(args.root) if args.root else None)
    arena.board(args.board)
    origin, author = run_origin(args.run), "cachecraft-search"
    base = args.name or f"search-{origin['seed']}-{origin['random_seed']}"
    picks = _picks(args, arena, author)
    secret = None if args.dev_only or not picks else load_secret()
    status = 0
    for rank, child in enumerate(picks, 1):
        name = base if child is None else f"{base}-{rank}"
        out = Path(args.out) if args.out else arena.root / "search_submissions" / Path(args.run).name
        out = out if child is None else out / name
        prepared = prepare(args.run, out, args.board, arena, name=name, author=author, child=child, rank=rank)
        gain = prepared.dev.get("gain")
        print(f"wrote {out} ({len(prepared.edits)} edits from the seed); dev: overall "
              f"{prepared.dev['scores'][prepared.dev['method']]['overall']:.3f}"
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
        _print_entry(entry, args.board, prepared.review)
    return status

SEARCH_HELP = ("evolve a policy program on a board's dev items (fitness = `arena dev`'s score; every generation "
               "scored in one batched pass; offline mutator with the structural operators) and write a run folder "
               "for `submit-search`; reads no test item and needs no secret")


def _cmd_search(args: argparse.Namespace) -> int:
    if args.random_seeds or args.ray is not None:
        return _search_seeds(args)
    from ..search.board_fitness import BoardFitness
    from ..search.board_search import board_search
    from ..search.seeds import seed_path

    fitness = BoardFitness(args.board, args.profile, root=args.root, seed_program=seed_path(args.seed))
    out = Path(args.out) if args.out else fitness.arena.root / "search_runs" / f"{args.board}_{args.seed}_{args.random_seed}"
    board_search(args.board, args.seed, args.generations, args.population, out, args.profile,
                 random_seed=args.random_seed, structural=not args.linear_only, fitness=fitness)
    print(f"wrote the run {out}; submit its best with `cachecraft arena submit-search {out} --board {args.board}`")
    return 0


def _search_seeds(args: argparse.Namespace) -> int:
    """``--random-seeds`` (and/or ``--ray``): one run per seed, here one after another or side by side on Ray."""
    from ..arena.arena import Arena
    from ..search.board_seeds import board_searches

    seeds = args.random_seeds or [args.random_seed]
    out = Path(args.out) if args.out else Arena(args.profile, args.root).root / "search_runs"
    table = board_searches(args.board, args.seed, seeds, args.generations, args.population, out, args.profile,
                           root=args.root, structural=not args.linear_only, ray=args.ray,
                           cpus_per_task=args.cpus_per_task, max_retries=args.max_retries)
    print(table.to_string(index=False))
    done = table[table.error == ""]
    if len(done):
        best = done.loc[done.best.idxmax()]
        print(f"best run: {best.run} (dev fitness {best.best:.4f}); submit it with `cachecraft arena submit-search "
              f"{best.run} --board {args.board}`")
    return 0 if len(done) == len(table) else 1


def add_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``search`` (the board search) through ``cli.arena``'s ``verb``."""
    p = verb("search", _cmd_search, SEARCH_HELP)
    p.add_argument("--board", required=True, help="board name (A, B_online, B_offline)")
    p.add_argument("--seed", default="v1", help="seed program (v1, v5, ...; default v1, not FRC)")
    p.add_argument("--generations", type=int, default=5)
    p.add_argument("--population", type=int, default=6, help="children per generation, scored in one batched pass")
    p.add_argument("--random-seed", type=int, default=0, help="the run is deterministic for it")
    p.add_argument("--random-seeds", type=int, nargs="+", metavar="N",
                   help="several runs, one per seed, into <out>/<board>_<seed>_<N> with a seeds.csv; with --ray "
                        "side by side (one worker each), else one after another sharing the prefills")
    p.add_argument("--linear-only", action="store_true", help="only the linear-scorer edits (no structural operators)")
    p.add_argument("--out", help="run folder (default <root>/search_runs/<board>_<seed>_<random seed>); with "
                                 "--random-seeds or --ray, the folder of the runs (default <root>/search_runs)")
    return p


def add_submit_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``submit-search`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("submit-search", _cmd_submit_search, SUBMIT_SEARCH_HELP)
    p.add_argument("run", help="a search run folder (written by `cachecraft evolve`, with best/best_program.py)")
    p.add_argument("--board", required=True, help="board name (A, B_online, B_offline)")
    p.add_argument("--name", help="the entry's name (default search-<seed>-<random seed>; with --top, -1, -2, ...)")
    p.add_argument("--top", type=int, default=1, metavar="K",
                   help="submit the run's K best distinct programs (best first), as many as the author's rate "
                        "limit allows now (5 per 24 hours); each entry's origin names its child and rank")
    p.add_argument("--out", help="where to write the submission folder (default <root>/search_submissions/<run>)")
    p.add_argument("--round", type=int, default=1)
    p.add_argument("--dev-only", action="store_true", help="write the folder and score it on dev items; submit nothing")
    p.add_argument("--no-judge", action="store_true", help="skip the rule judge's review after the submission")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run even where the sandbox cannot set up its OS boundary (weaker; the entry records it)")
    return p
