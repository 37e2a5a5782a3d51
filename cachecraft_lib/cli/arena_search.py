"""``cachecraft arena search``: a board search pre-registered in the arena's ledger, its submission chosen on dev
items alone (the submission: ``arena_submit_search``)."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

SEARCH_HELP = ("evolve a policy program on a board's dev items (fitness = `arena dev`'s score on the search half "
               "of the dev contexts; every generation scored in one batched pass; offline mutator with the "
               "structural operators), then choose the submission on the selection half; with --preregister the "
               "plan goes into the arena's ledger first. Reads no test item and never holds the secret")


def _seed_program(args: argparse.Namespace) -> str:
    """``--seed-program``, or the old ``--seed`` with a warning (issue 50: --seed reads as a random seed)."""
    if args.seed_alias is not None:
        warnings.warn("--seed is deprecated: it names the seed PROGRAM; use --seed-program (random seeds: "
                      "--random-seed/--random-seeds)", FutureWarning, stacklevel=2)
        print("warning: --seed is deprecated, use --seed-program", file=sys.stderr)
        return args.seed_alias
    return args.seed_program


def _cmd_search(args: argparse.Namespace) -> int:
    from ..search import dev_only

    dev_only.install()  # first: the secret is unreachable before anything is loaded (issue 48)
    from ..arena.arena import Arena
    from ..search import preregister, selection
    from ..search.seeds import seed_path

    seed = _seed_program(args)
    seeds = args.random_seeds or [args.random_seed]
    arena = Arena(args.profile, args.root, progress=False)
    board = arena.board(args.board)
    event = None
    halves = selection.split_dev(arena.items(board, "dev"), args.split_seed)  # public dev items: no child run yet
    if args.preregister:
        plan = preregister.make_plan(args.board, args.profile, seed, seed_path(seed).read_text(), args.generations,
                                     args.population, seeds, not args.linear_only, args.split_seed, args.select_top,
                                     selection.rule_text(args.split_seed, args.select_top), arena.ledger.events(),
                                     args.round, args.notes or "", author=args.author,
                                     search_contexts=list(halves.search))
        event = preregister.record_plan(arena.ledger, plan)  # before any child is evaluated
        print(f"plan recorded in {arena.ledger.path} (event {event['seq']}, plan hash {plan.digest()}, by "
              f"{args.author}); round {args.round}'s commitment: "
              f"{plan.round_commitment or 'none yet (drawn after this plan)'}")
    runs = _searches(args, arena, seed, seeds, list(halves.search), event)
    chosen = dev_only.dev_fitness(args.board, args.profile, root=args.root, gate=0.0,
                                  contexts=list(halves.selection), arena=arena)
    rows = []
    for random_seed, run in runs:
        picked = selection.select(run, chosen, args.select_top)
        rows.append({"random_seed": random_seed, "run": str(run), "search_half_best": picked.shortlist.search_fitness.max(),
                     "selected": picked.child_id, "selection_half": round(picked.estimate, 4)})
    table = pd.DataFrame(rows)
    print(f"dev contexts: {len(halves.search)} search half, {len(halves.selection)} selection half (split seed "
          f"{halves.seed}); each run's submission = the best on the selection half of its top {args.select_top}:")
    print(table.to_string(index=False))
    print("the selection-half score is the dev estimate (the search never saw those contexts); submit with "
          f"`cachecraft arena submit-search {' '.join(r for r in table.run)} --board {args.board}`")
    return 0


def _searches(args: argparse.Namespace, arena: Any, seed: str, seeds: list[int], contexts: list[str],
              event: dict | None) -> list[tuple[int, Path]]:
    """The runs: one folder with one random seed (``--out`` is the run), else ``board_seeds`` (``--out`` holds
    the runs)."""
    if not args.random_seeds and args.ray is None:
        from ..search.board_search import board_search
        from ..search.dev_only import dev_fitness
        from ..search.seeds import seed_path

        out = Path(args.out) if args.out else arena.root / "search_runs" / f"{args.board}_{seed}_{args.random_seed}"
        fitness = dev_fitness(args.board, args.profile, root=args.root, seed_program=seed_path(seed),
                              contexts=contexts, arena=arena)
        board_search(args.board, seed, args.generations, args.population, out, args.profile,
                     random_seed=args.random_seed, structural=not args.linear_only, fitness=fitness, plan_event=event)
        return [(args.random_seed, out)]
    from ..search.board_seeds import board_searches

    out = Path(args.out) if args.out else arena.root / "search_runs"
    table = board_searches(args.board, seed, seeds, args.generations, args.population, out, args.profile,
                           root=args.root, structural=not args.linear_only, ray=args.ray,
                           cpus_per_task=args.cpus_per_task, max_retries=args.max_retries, contexts=contexts,
                           plan_event=event)
    failed = table[table.error != ""]
    if len(failed):
        raise RuntimeError(f"search runs failed for random seeds {list(failed.random_seed)}: {list(failed.error)}")
    return [(int(s), Path(r)) for s, r in zip(table.random_seed, table.run, strict=True)]


def random_seed(text: str) -> int:
    """``--random-seed(s)``: an int with 0 <= N < 2**31 (the ledger refuses others)."""
    from ..arena.scoring.plan_looks import SEED_LIMIT

    value = int(text)
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"a random seed is 0 <= N < 2**31, got {text}")
    return value


def add_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``search`` (the board search) through ``cli.arena``'s ``verb``."""
    from ..search.selection import SPLIT_SEED, TOP_K

    p = verb("search", _cmd_search, SEARCH_HELP)
    p.add_argument("--board", required=True, help="board name (A, B_online, B_offline)")
    p.add_argument("--seed-program", default="v1", help="the seed PROGRAM the search starts from (v1, v5, ...; "
                                                        "default v1, a generic scorer, not FRC)")
    p.add_argument("--seed", dest="seed_alias", default=None, help="deprecated alias of --seed-program (warns)")
    p.add_argument("--generations", type=int, default=5, help="generations after the seed's (default 5)")
    p.add_argument("--population", type=int, default=6, help="children per generation, scored in one batched pass")
    p.add_argument("--random-seed", type=random_seed, default=0,
                   help="the run's random seed (0 <= N < 2**31): the run is deterministic for it")
    p.add_argument("--random-seeds", type=random_seed, nargs="+", metavar="N",
                   help="several runs, one per seed, into <out>/<board>_<seed program>_<N> with a seeds.csv; with "
                        "--ray side by side (one worker each), else one after another sharing the prefills")
    p.add_argument("--linear-only", action="store_true", help="only the linear-scorer edits (no structural operators)")
    p.add_argument("--preregister", action="store_true",
                   help="record the plan (board, seed program, sizes, random seeds, selection rule, round and its "
                        "commitment) in the arena's ledger before anything is evaluated; `submit-search` refuses a "
                        "run without one unless told --exploratory")
    p.add_argument("--round", type=int, default=1, help="the round the plan names (its test items are drawn later)")
    p.add_argument("--split-seed", type=int, default=SPLIT_SEED,
                   help=f"public seed of the dev contexts' split into search and selection halves (default {SPLIT_SEED})")
    p.add_argument("--select-top", type=int, default=TOP_K, metavar="K",
                   help=f"the submission is the best on the selection half among the run's top K by search-half "
                        f"fitness (default {TOP_K})")
    p.add_argument("--notes", help="free text recorded with the plan (why these sizes)")
    p.add_argument("--author", default="cachecraft-search",
                   help="who registers the plan (default cachecraft-search): `submit-search` enters the run's "
                        "program under this author, and a claim of the plan by anyone else fails")
    p.add_argument("--out", help="run folder (default <root>/search_runs/<board>_<seed program>_<random seed>); with "
                                 "--random-seeds or --ray, the folder of the runs (default <root>/search_runs)")
    return p
