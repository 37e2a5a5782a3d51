"""``cachecraft arena search`` (pre-registered, chosen on dev items alone) and ``arena submit-search RUN...``."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

SUBMIT_SEARCH_HELP = ("submit search runs' chosen programs (`cachecraft arena search`'s run folders: the selection "
                      "half's choice, else best/best_program.py): refuse a run whose plan was not recorded in the "
                      "ledger before it started unless --exploratory, convert, score on the dev items, write "
                      "DESCRIPTION.md from facts, `arena submit` it (hidden test items, gate, points; the ledger "
                      "records the run, its plan or the exploratory label) and record the rule judge's review; "
                      "with several runs (one per random seed), report how many beat FRC and the pooled gain")
SEARCH_HELP = ("evolve a policy program on a board's dev items (fitness = `arena dev`'s score on the search half "
               "of the dev contexts; every generation scored in one batched pass; offline mutator with the "
               "structural operators), then choose the submission on the selection half; with --preregister the "
               "plan goes into the arena's ledger first. Reads no test item and never holds the secret")


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


def add_submit_search_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``submit-search`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("submit-search", _cmd_submit_search, SUBMIT_SEARCH_HELP)
    p.add_argument("run", nargs="+", help="search run folder(s) (`cachecraft arena search`'s, or `cachecraft "
                                          "evolve`'s with best/best_program.py); several: one per random seed")
    p.add_argument("--exploratory", action="store_true",
                   help="submit a run whose plan was not recorded before it started; the label is recorded with "
                        "the entry and shown in its DESCRIPTION.md")
    p.add_argument("--board", required=True, help="board name (A, B_online, B_offline)")
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
