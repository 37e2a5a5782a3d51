"""``cachecraft arena search``: a board search pre-registered in the arena's ledger, its submission chosen on dev
items alone (the submission: ``arena_submit_search``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from .search_options import seed_program as _seed_program  # --seed-program, or the old --seed NAME (warns)

SEARCH_HELP = ("evolve a policy program on a board's dev items (fitness = `arena dev`'s score on the search half "
               "of the dev contexts; islands of elites, the offline mutator's structural operators and TPE-tuned "
               "weights, each generation screened by successive halving over the contexts, until --iterations "
               "evaluations are spent), then choose the submission on the selection half; with --preregister the "
               "plan goes into the arena's ledger first. Reads no test item and never holds the secret")


def _cmd_search(args: argparse.Namespace) -> int:
    from ..search import dev_only

    dev_only.install()  # first: the secret is unreachable before anything is loaded (issue 48)
    from ..arena.arena import Arena
    from ..search import preregister, selection
    from ..search.seeds import seed_path
    from .search_options import check_board

    check_board("cachecraft arena search", args.board, args.profile)
    seed = _seed_program(args)
    seeds = args.random_seeds or [args.random_seed]
    budget, population = _budget(args)
    generations = -(-budget // population)
    arena = Arena(args.profile, args.root, progress=False)
    board = arena.board(args.board)
    event = None
    halves = selection.split_dev(arena.items(board, "dev"), args.split_seed)  # public dev items: no child run yet
    if args.preregister:
        plan = preregister.make_plan(args.board, args.profile, seed, seed_path(seed).read_text(), generations,
                                     population, seeds, args.structural, args.split_seed, args.top,
                                     selection.rule_text(args.split_seed, args.top), arena.ledger.events(),
                                     args.round, args.notes or "", author=args.author,
                                     search_contexts=list(halves.search), controls=_planned_controls(args),
                                     criteria=_planned_criteria(args, len(seeds), board.gate_threshold),
                                     selection_contexts=list(halves.selection))
        event = preregister.record_plan(arena.ledger, plan, reserve=True)  # before any child is evaluated
        print(f"plan recorded in {arena.ledger.path} (event {event['seq']}, plan hash {plan.digest()}, by "
              f"{args.author}); round {args.round}'s commitment: "
              f"{plan.round_commitment or 'none yet (drawn after this plan)'}")
    runs = _searches(args, arena, seed, seeds, list(halves.search), event, budget, population)
    chosen = dev_only.dev_fitness(args.board, args.profile, root=args.root, gate=0.0,
                                  contexts=list(halves.selection), arena=arena)
    if args.controls:
        runs = runs + _random_controls(args, arena, seed, runs, list(halves.search))
    rows = []
    for random_seed, run in runs:
        picked = selection.select(run, chosen, args.top)
        rows.append({"random_seed": random_seed, "run": str(run), "search_half_best": picked.shortlist.search_fitness.max(),
                     "selected": picked.child_id, "selection_half": round(picked.estimate, 4)})
    table = pd.DataFrame(rows)
    print(f"dev contexts: {len(halves.search)} search half, {len(halves.selection)} selection half (split seed "
          f"{halves.seed}); each run's submission = the best on the selection half of its top {args.top}:")
    print(table.to_string(index=False))
    print("the selection-half score is the dev estimate (the search never saw those contexts); submit with "
          f"`cachecraft arena submit-search {' '.join(r for r in table.run)} --board {args.board}`")
    return 0


def _planned_controls(args: argparse.Namespace) -> tuple[str, ...]:
    """The controls the plan names: only what this command will really run (a plan must not promise a control it
    skips): random search with ``--controls``. The seed program's test look is notebook 08's (``score_controls``)."""
    from ..search.plan_comparisons import RANDOM_CONTROL

    return (RANDOM_CONTROL,) if args.controls else ()


def _planned_criteria(args: argparse.Namespace, seeds: int, gate_threshold: float) -> tuple:
    """Issue 56's pass criteria for the board, kept to those against a comparator or a control this plan runs."""
    from ..search import plan_criteria
    from ..search.plan_comparisons import DEFAULT_COMPARATORS

    named = set(DEFAULT_COMPARATORS) | set(_planned_controls(args))
    return tuple(c for c in plan_criteria.issue56(args.board, seeds, gate_threshold) if c.against in named)


def _random_controls(args: argparse.Namespace, arena: Any, seed: str, runs: list[tuple[int, Path]],
                     contexts: list[str]) -> list[tuple[int, Path]]:
    """``--controls``: for each run, random search (``random_control``) at the run's cost in evaluations, with its
    random seed, on the same search half, into ``<run>_random`` (the same selection rule then picks its program)."""
    from ..search.dev_only import dev_fitness
    from ..search.random_control import random_search, search_budget
    from ..search.seeds import seed_path

    fitness = dev_fitness(args.board, args.profile, root=args.root, seed_program=seed_path(seed), contexts=contexts,
                          arena=arena)
    out = []
    for random_seed, run in runs:
        depth = max(1, len(pd.read_csv(Path(run) / "generations.csv")) - 1)  # as deep as the run's generations
        folder = random_search(args.board, seed, search_budget(run), Path(f"{run}_random"), args.profile,
                               random_seed=random_seed, structural=args.structural, fitness=fitness, max_edits=depth)
        out.append((random_seed, folder))
    return out


def _budget(args: argparse.Namespace) -> tuple[int, int]:
    """(iterations, population): ``--iterations``, else the old ``--generations`` x population, else the default."""
    from ..search.board_search import POPULATION
    from .search_options import iterations

    population = args.population or POPULATION[args.engine]
    return iterations(args, population, DEFAULT_ITERATIONS), population


def _searches(args: argparse.Namespace, arena: Any, seed: str, seeds: list[int], contexts: list[str],
              event: dict | None, budget: int, population: int) -> list[tuple[int, Path]]:
    """The runs: one folder with one random seed (``--out`` is the run), else ``board_seeds`` (``--out`` holds
    the runs)."""
    if not args.random_seeds and args.ray is None:
        from ..search.board_search import board_search
        from ..search.dev_only import dev_fitness
        from ..search.seeds import seed_path

        out = Path(args.out) if args.out else arena.root / "search_runs" / f"{args.board}_{seed}_{args.random_seed}"
        fitness = dev_fitness(args.board, args.profile, root=args.root, seed_program=seed_path(seed),
                              contexts=contexts, arena=arena)
        board_search(args.board, seed, out_dir=out, profile=args.profile, random_seed=args.random_seed,
                     structural=args.structural, fitness=fitness, plan_event=event, engine=args.engine,
                     iterations=budget, population=population, islands=args.islands)
        return [(args.random_seed, out)]
    from ..search.board_seeds import board_searches

    out = Path(args.out) if args.out else arena.root / "search_runs"
    table = board_searches(args.board, seed, seeds, -(-budget // population), population, out, args.profile,
                           root=args.root, structural=args.structural, ray=args.ray, engine=args.engine,
                           iterations=budget, islands=args.islands,
                           cpus_per_task=args.cpus_per_task, max_retries=args.max_retries, contexts=contexts,
                           plan_event=event)
    failed = table[table.error != ""]
    if len(failed):
        raise RuntimeError(f"search runs failed for random seeds {list(failed.random_seed)}: {list(failed.error)}")
    return [(int(s), Path(r)) for s, r in zip(table.random_seed, table.run, strict=True)]


DEFAULT_ITERATIONS = 30  # evaluations: the earlier default's 5 generations x 6 children


def add_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``search`` (the board search) through ``cli.arena``'s ``verb``; the options both searches share come from
    ``search_options`` (``cachecraft evolve`` takes the same)."""
    from ..search.board_search import ENGINES, POPULATION
    from ..search.halving_search import ISLANDS
    from ..search.selection import SPLIT_SEED, TOP_K
    from .search_options import DefaultsShown, Deprecated, add_search_options, random_seed

    p = verb("search", _cmd_search, SEARCH_HELP)
    p.formatter_class = DefaultsShown  # every default in --help, the arena's shared options' too
    add_search_options(p, seed_program="v1", random_seed_default=0, structural_default=True, board_required=True,
                       root=False, iterations_help=f"the run's budget in evaluations: full dev evaluations of the "
                       f"search half, a child culled by successive halving counting its share (default: "
                       f"{DEFAULT_ITERATIONS})",
                       out_help="run folder (default: <root>/search_runs/<board>_<seed program>_<random seed>); with "
                                "--random-seeds or --ray, the folder of the runs (default: <root>/search_runs)")
    p.add_argument("--engine", choices=ENGINES, default=ENGINES[0],
                   help="halving: islands, TPE-tuned weights, children screened by successive halving over the dev "
                        "contexts; generational: the earlier loop, every child scored in full (default: %(default)s)")
    p.add_argument("--population", type=int, default=None,
                   help="children per generation, screened in one batched pass (default: "
                        + ", ".join(f"{e} {n}" for e, n in POPULATION.items()) + ")")
    p.add_argument("--islands", type=int, default=ISLANDS,
                   help="halving engine: independent elites; a lagging one restarts from the seed (default: %(default)s)")
    p.add_argument("--random-seeds", type=random_seed, nargs="+", metavar="N",
                   help="several runs, one per seed, into <out>/<board>_<seed program>_<N> with a seeds.csv; with "
                        "--ray side by side (one worker each), else one after another sharing the prefills "
                        "(default: one run, --random-seed)")
    p.add_argument("--controls", action="store_true",
                   help="also run random search at each run's cost in evaluations (the same program space, no "
                        "selection; search.random_control) on the same search half, into <run>_random, chosen by the "
                        "same rule: its row is printed below the run's (default: off)")
    p.add_argument("--preregister", action="store_true",
                   help="record the plan (board, seed program, sizes, random seeds, selection rule, round and its "
                        "commitment) in the arena's ledger before anything is evaluated; `submit-search` refuses a "
                        "run without one unless told --exploratory (default: off)")
    p.add_argument("--round", type=int, default=1,
                   help="the round the plan names (its test items are drawn later) (default: %(default)s)")
    p.add_argument("--split-seed", type=int, default=SPLIT_SEED,
                   help="public seed of the dev contexts' split into search and selection halves (default: %(default)s)")
    p.add_argument("--top", type=int, default=TOP_K, metavar="K",
                   help="the submission is the best on the selection half among the run's top K by search-half "
                        "fitness (default: %(default)s)")
    p.add_argument("--select-top", dest="top", type=int, action=Deprecated, new="--top", metavar="K",
                   default=argparse.SUPPRESS, help="old spelling of --top (warns)", convert=int)
    p.add_argument("--notes", default="", help="free text recorded with the plan (why these sizes) (default: none)")
    p.add_argument("--author", default="cachecraft-search",
                   help="who registers the plan: `submit-search` enters the run's program under this author, and a "
                        "claim of the plan by anyone else fails (default: %(default)s)")
    return p
