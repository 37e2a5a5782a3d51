"""The paper's cascade (notebook 05's search) with and without its answer memo, in one run, on the same programs.

    python benchmarks/bench_cascade.py --run data/results/search/cpu_v5_offline --programs 40   # minutes
    python benchmarks/bench_cascade.py --run RUN --programs 8 --stage 1                           # a quick look

The programs are the children of a finished search run (its ``evolution_trace.jsonl``, in the order the search
scored them, the seed first), scored through stage 1 and stage 2 with the run's own settings
(``search_config.json``). Two evaluators load the same model and build every sample's feature contexts before the
clock starts and score the seed once as a warm-up (nothing from it is kept: no answer, no S1): the baseline then
answers every sample of every program anew (``memo_answers = False``, as before the memo), the other answers each
sample once per distinct kept set. The baseline runs first, so any warm-up left favours the memo side slightly. It checks that both give every program the same S1, S2,
validity and fitness (exit 1 otherwise), and prints, per side, seconds, answers computed and programs per minute,
and the ratio. Programs that keep the same tokens as one scored before are common in a search (a weight nudged
without changing the ranking), which is what the memo saves. Results are the embedded stand-in model's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def programs(run: Path, limit: int) -> list[str]:
    """The seed and the run's children, in the order the search scored them (the first ``limit``)."""
    rows = [json.loads(line) for line in (run / "evolution_trace.jsonl").read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: r["iteration"])
    seen, out = set(), []
    for code in [rows[0]["parent_code"], *(r["child_code"] for r in rows)] if rows else []:
        if code not in seen:  # OpenEvolve scores a program once
            seen.add(code)
            out.append(code)
    return out[:limit]


def score_all(evaluator, sources: list[str], stage: int) -> tuple[list[dict], float, int]:
    """Every program's metrics at ``stage`` (1: S1 only; 2: the cascade), the seconds it took and answers computed."""
    answered, start = evaluator.answered, time.perf_counter()
    metrics = [(evaluator.stage1 if stage == 1 else evaluator.stage2)(s)["metrics"] for s in sources]
    return metrics, time.perf_counter() - start, evaluator.answered - answered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="data/results/search/cpu_v5_offline", help="a finished search run folder")
    parser.add_argument("--programs", type=int, default=40, help="how many of the run's programs (default 40)")
    parser.add_argument("--stage", type=int, choices=(1, 2), default=2, help="score through stage 1 or 2 (default 2)")
    args = parser.parse_args()

    from cachecraft_lib.search.cascade import CascadeEvaluator, SearchSettings

    run = Path(args.run)
    settings = SearchSettings.from_file(run / "search_config.json")
    sources = programs(run, args.programs)
    sides = {}
    for label, memo in (("every answer anew", False), ("answer memo", True)):
        evaluator = CascadeEvaluator(settings)  # its gate is measured here, before the clock
        for stage in (1, 2)[:args.stage]:  # every sample's feature contexts built before the clock
            for i in range(len(evaluator.stage_rows[stage])):
                evaluator._sample(stage, i)
        evaluator.stage2(evaluator.seed_source or sources[0])  # a warm-up, then nothing kept from it
        for kept in (evaluator._answers, evaluator._s1_cache, evaluator._s1_scores):
            kept.clear()
        evaluator.memo_answers = memo
        sides[label] = score_all(evaluator, sources, args.stage)
        print(f"{label}: {len(sources)} programs in {sides[label][1]:.1f} s, {sides[label][2]} answers computed",
              flush=True)
        del evaluator  # one model in memory at a time
    (base, t0, n0), (fast, t1, n1) = sides.values()
    same = base == fast
    print(f"\nprograms: {len(sources)} from {run} (stage {args.stage}; model {settings.model})")
    print(f"{'side':<20}{'seconds':>10}{'answers':>10}{'programs/min':>15}")
    for label, (_, seconds, answers) in sides.items():
        print(f"{label:<20}{seconds:>10.1f}{answers:>10}{60 * len(sources) / seconds:>15.2f}")
    print(f"memo / anew: {t1 / t0:.2f} of the time ({t0 / t1:.2f}x); answers computed {n1} of {n0}")
    print("same metrics for every program:", "yes" if same else "NO")
    if not same:
        for i, (a, b) in enumerate(zip(base, fast, strict=True)):
            if a != b:
                print(f"  program {i}: {a} != {b}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
