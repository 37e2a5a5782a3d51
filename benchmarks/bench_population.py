"""Board fitness evaluations per hour: a population at once vs one candidate at a time (issue 38, item 2).

    python benchmarks/bench_population.py [--profile cpu|smoke] [--board A] [--population 8] [--generations 2]

The same candidates (``board_fitness.offline_population`` from the V1 seed, deterministic) go through the
board-fitness cascade twice: one at a time through ``Arena.run`` (``BoardFitness.evaluate_one``: every
candidate re-runs each dev context's prefill, the full cache's decode and its own decode batch), and as whole
generations (``BoardFitness.evaluate``: each context's prefill and features kept across generations, one
sandbox per candidate, one sandbox call per layer for every budget, all candidates x budgets of several
contexts decoded in one batch, identical selections decoded once). The gate is 0 so that every candidate is a
full dev evaluation. Every candidate's gate score and fitness must be identical on both paths (asserted).
Printed: evaluations per hour of each path, the first generation (which pays the prefills and features) and
the later ones (which do not) apart, the ratios, the caches decoded once for several candidates, and the
machine's load (the two paths' timings are only comparable on the same load). The one-at-a-time path runs
twice by default: with each context's caches decoded alone (the arena's path when issue 38 was filed: the
reference of its 10x) and with the caches of many contexts decoded together (the arena's path now, which the
population path's decode also uses, so it narrows the ratio).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from cachecraft_lib.arena import board_runner
from cachecraft_lib.search.board_fitness import load_board_fitness, offline_population
from cachecraft_lib.search.seeds import seed_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--board", default="A")
    parser.add_argument("--population", type=int, default=8, help="candidates per generation")
    parser.add_argument("--generations", type=int, default=2, help="batched generations (the first pays prefills)")
    parser.add_argument("--single", type=int, default=None, help="candidates run one at a time (default: a generation)")
    parser.add_argument("--single-modes", default="per-context,batched",
                        help="the one-at-a-time reference: per-context (each context decoded alone, the arena's path "
                             "when issue 38 was filed), batched (the arena's path now), or both")
    parser.add_argument("--arena-root", help="arena results folder (its dev baselines are reused); default: a temp one")
    args = parser.parse_args()

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    root = Path(args.arena_root) if args.arena_root else Path(tempfile.mkdtemp(prefix="bench-population-"))
    start = time.time()
    fit = load_board_fitness(args.board, profile=args.profile, root=root, gate=0.0)
    print(f"board {args.board} ({args.profile}): {fit.items.context_id.nunique()} dev contexts, budgets "
          f"{fit.board.budgets}; baselines and items ready in {time.time() - start:.0f} s", flush=True)
    seed = seed_path("v1").read_text()
    generations = [offline_population(seed, args.population, random_seed=g) for g in range(args.generations)]

    batched, times = {}, []
    for g, sources in enumerate(generations):
        t = time.time()
        for r in fit.evaluate(sources):
            batched[r.name] = r
        times.append(time.time() - t)
        print(f"batched generation {g}: {len(sources)} candidates in {times[-1]:.1f} s (caches decoded once for "
              f"several candidates so far: {fit.runner.memo_hits})", flush=True)

    batched_contexts = board_runner.CONTEXTS_PER_DECODE
    singles = generations[0][: args.single or args.population]
    per_hour_single = {}
    for mode in args.single_modes.split(","):
        # per-context: each context's caches decoded on their own, as the arena's path did when issue 38 was
        # filed ("today's cascade"); batched: the arena's path now (the caches of many contexts decoded together)
        board_runner.CONTEXTS_PER_DECODE = 1 if mode == "per-context" else batched_contexts
        fresh = load_board_fitness(args.board, profile=args.profile, root=root, gate=0.0)  # nothing kept from the above
        t = time.time()
        one = [fresh.evaluate_one(s) for s in singles]
        single_s = time.time() - t
        print(f"one at a time ({mode} decode): {len(singles)} candidates in {single_s:.1f} s", flush=True)
        for r in one:
            b = batched[r.name]
            assert r.valid and b.valid, (r, b)
            assert (b.gate_score, b.fitness) == (r.gate_score, r.fitness), (r.name, b.fitness, r.fitness)
        print(f"identical gate scores and fitness for all {len(one)} candidates run both ways: "
              + ", ".join(f"{r.fitness:.4f}" for r in one))
        per_hour_single[mode] = 3600 * len(singles) / single_s
    board_runner.CONTEXTS_PER_DECODE = batched_contexts

    per_hour_cold = 3600 * args.population / times[0]
    warm = sum(times[1:]) / len(times[1:]) if len(times) > 1 else None
    for mode, single in per_hour_single.items():
        print(f"one at a time ({mode} decode): {single:8.1f} evaluations/hour")
        print(f"  batched, first generation:  {per_hour_cold:8.1f} evaluations/hour  ratio {per_hour_cold / single:.2f}x")
        if warm:
            per_hour_warm = 3600 * args.population / warm
            print(f"  batched, later generations: {per_hour_warm:7.1f} evaluations/hour  ratio "
                  f"{per_hour_warm / single:.2f}x  (prefills kept)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.arena_root:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
