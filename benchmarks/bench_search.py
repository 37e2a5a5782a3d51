"""The generational search beside the halving engine at the same budget, in one run.

    python benchmarks/bench_search.py --profile cpu --budget 30      # board A's search half, a few minutes
    python benchmarks/bench_search.py --profile smoke --budget 12    # seconds

Both engines run on the same fitness (board A's dev items, the search half as ``arena search`` splits them, the
embedded stand-in model at the profile's size), from the same seed program and random seed, with the same budget
of evaluations: one evaluation is one program scored on every context of the fitness; a child the halving engine
culls after a few contexts costs its share (context runs / contexts), counted by the population runner itself.
Each engine starts from the same caches (every context's prefill computed beforehand, no decoded cache or gate
result kept from the other engine).

It prints, per engine: evaluations spent, children scored (fully or partly), wall and CPU seconds (this process and
its finished sandboxes), evaluations and children per CPU-minute with the ratios, and the best dev fitness against
evaluations. The generational engine runs as the earlier search did (torch's default threads); the halving engine
screens on ``halving.THREADS`` torch thread(s); ``--one-thread-baseline`` adds the generational engine on one thread
too, so the share of the gain that comes from the thread setting alone is printed beside it.

Before that it checks the fast path: a program scored in full through the halving path (one torch thread, the cache
built by ``policy_batch.kept_cache_row``) has exactly the plain cascade's fitness, gate score and per-unit values
(torch's default threads), and every decoded cache both paths hold (same context, budget and kept set, the decode
memo's key) has the same answer text and score; for the first program both sides also recompute every context's
prefill and features (none kept), so those are compared across the thread settings too. Results are the embedded
stand-in model's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cachecraft_lib.search import dev_only  # noqa: E402
from cachecraft_lib.search.board_fitness import offline_population  # noqa: E402
from cachecraft_lib.search.board_search import board_search  # noqa: E402
from cachecraft_lib.search.halving import THREADS, Halving, torch_threads  # noqa: E402
from cachecraft_lib.search.seeds import seed_path  # noqa: E402
from cachecraft_lib.search.selection import SPLIT_SEED, split_dev  # noqa: E402


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (the candidates' sandboxes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def fresh_caches(fit, prefills: bool = False) -> None:
    """Forget what an earlier engine left: decoded caches and gate results (and, with ``prefills``, every context's
    prefill and features; otherwise they stay: both engines had them)."""
    fit.runner._memo.clear()
    fit._gates.clear()
    if prefills:
        fit.runner._prepared.clear()


def decoded(fit) -> dict:
    """The decode memo's answers: (context, budget, kept set) -> each row's (item, answer text, score)."""
    return {key: [(r["item"], r["predicted_answer"], r["score"]) for r in rows] for key, rows in fit.runner._memo.items()}


def check_fast_path(fit, seed_code: str, n: int = 3) -> list[dict]:
    """A full evaluation through the halving path against the plain cascade, program by program: fitness, gate
    score, per-unit values, and the answers of every cache both decoded (the first program's prefills recomputed
    on each side)."""
    rows = []
    for i, program in enumerate([seed_code] + offline_population(seed_code, n - 1, random_seed=11)):
        fresh_caches(fit, prefills=i == 0)
        fast = Halving(fit).screen([program])[0].result
        fast_answers = decoded(fit)
        fresh_caches(fit, prefills=i == 0)
        plain = fit.evaluate([program])[0]
        plain_answers = decoded(fit)
        same_units = fast.report is not None and plain.report is not None and \
            fast.report["units"].equals(plain.report["units"])
        shared = fast_answers.keys() & plain_answers.keys()
        same_answers = len(shared) == len(plain_answers) and all(fast_answers[k] == plain_answers[k] for k in shared)
        rows.append({"program": fast.name, "halving": fast.fitness, "plain": plain.fitness, "caches": len(shared),
                     "answers_equal": same_answers, "equal": fast.fitness == plain.fitness
                     and fast.gate_score == plain.gate_score and same_units and same_answers})
    return rows


def run_engine(fit, engine: str, budget: int, random_seed: int, out: Path, profile: str,
               threads: int | None = None) -> dict:
    """One engine's run; ``threads``: torch threads for the whole run (None: as set; the halving engine sets its
    own while screening)."""
    fresh_caches(fit)
    label = engine if threads is None else f"{engine}, {threads} thread(s)"
    runs, wall, cpu = fit.runner.context_runs, time.perf_counter(), cpu_seconds()
    with torch_threads(threads):
        folder = board_search("A", "v1", out_dir=out / label.replace(", ", "-").replace(" ", ""), profile=profile,
                              random_seed=random_seed, fitness=fit, progress=False, engine=engine, iterations=budget)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    contexts = fit.items.context_id.nunique()
    evaluations = (fit.runner.context_runs - runs) / contexts
    gens = pd.read_csv(folder / "generations.csv")
    children = sum(1 for _ in open(folder / "evolution_trace.jsonl")) + 1  # the seed too
    return {"engine": label, "evaluations": round(evaluations, 2), "children": children, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "eval_per_cpu_min": round(60 * evaluations / cpu, 2),
            "children_per_cpu_min": round(60 * children / cpu, 2), "best_dev": round(float(gens.best.max()), 4),
            "curve": gens[["evaluations", "best"]]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="cpu", help="smoke or cpu (default: %(default)s)")
    p.add_argument("--budget", type=int, default=30, help="evaluations per engine (default: %(default)s)")
    p.add_argument("--random-seed", type=int, default=0, help="the runs' random seed (default: %(default)s)")
    p.add_argument("--root", default=None, help="arena folder (default: a temporary one)")
    p.add_argument("--one-thread-baseline", action="store_true",
                   help="also run the generational engine on one torch thread (the thread setting's share of the gain)")
    p.add_argument("--out", default=None, help="a folder for both run folders and best_vs_evaluations.csv "
                                                "(default: a temporary one, removed)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp, dev_only.dev_only():
        root = args.root or Path(tmp) / "arena"
        from cachecraft_lib.arena.arena import Arena

        arena = Arena(args.profile, root, progress=False)
        halves = split_dev(arena.items(arena.board("A"), "dev"), SPLIT_SEED)
        start = time.perf_counter()
        fit = dev_only.dev_fitness("A", args.profile, root=root, seed_program=seed_path("v1"),
                                   contexts=list(halves.search), arena=arena)
        seed_code = seed_path("v1").read_text()
        fit.evaluate([seed_code])  # every context's prefill, for both engines alike
        print(f"board A ({args.profile}, the embedded stand-in model): {fit.items.context_id.nunique()} search-half "
              f"contexts, {fit.items.task.nunique()} tasks; loaded in {time.perf_counter() - start:.0f} s")
        checks = pd.DataFrame(check_fast_path(fit, seed_code))
        print("fast path: a full evaluation through halving vs the plain cascade\n" + checks.to_string(index=False))
        runs = Path(args.out) if args.out else Path(tmp)
        plan = [("generational", None), ("halving", None)] + ([("generational", 1)] if args.one_thread_baseline else [])
        results = [run_engine(fit, e, args.budget, args.random_seed, runs, args.profile, t) for e, t in plan]
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in results])
    print(f"\nsame budget ({args.budget} evaluations), random seed {args.random_seed}; torch threads: generational "
          f"{torch.get_num_threads()} (the default), halving {THREADS} while screening:\n" + table.to_string(index=False))
    old, new = results[:2]
    print(f"ratio halving / generational: evaluations per CPU-minute {new['eval_per_cpu_min'] / old['eval_per_cpu_min']:.2f}x, "
          f"children scored per CPU-minute {new['children_per_cpu_min'] / old['children_per_cpu_min']:.2f}x")
    for other in results[2:]:
        print(f"ratio halving / {other['engine']}: evaluations per CPU-minute "
              f"{new['eval_per_cpu_min'] / other['eval_per_cpu_min']:.2f}x; {other['engine']} / generational "
              f"{other['eval_per_cpu_min'] / old['eval_per_cpu_min']:.2f}x")
    curves = pd.concat([r["curve"].assign(engine=r["engine"]) for r in results], ignore_index=True)
    print("\nbest dev fitness against evaluations:\n" + curves.to_string(index=False))
    if args.out:
        curves.to_csv(Path(args.out) / "best_vs_evaluations.csv", index=False)
    return 0 if checks.equal.all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
