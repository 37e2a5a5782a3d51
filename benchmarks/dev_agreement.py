"""Is a board search's dev fitness signal? Programs of a run re-scored on two halves of the dev contexts.

    python benchmarks/dev_agreement.py RUN_FOLDER [--board A] [--profile cpu] [--top 12] [--arena-root DIR]

Takes the run's seed and its ``--top`` best distinct valid children (``evolution_trace.jsonl``), plus two
references written in the V1 seed's linear form: FRC's scorer (local attention 0.55, density 0.30, max head
0.15, whole chunks) and the seed itself. All are scored in one population pass on the board's dev items
(never the test split), then on the even and the odd dev contexts separately. Printed: each program's fitness
on all dev items and on each half, and the Spearman rank correlation between the halves with a bootstrap
interval over programs. A correlation whose interval includes 0 means that the ranking the search climbs is,
at this dev size, mostly noise of the items, and that a higher dev fitness says little about the test items.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from cachecraft_lib.arena.scoring.score import dev_report
from cachecraft_lib.search.board_fitness import load_board_fitness
from cachecraft_lib.search.seeds import seed_path


def frc_in_seed_form(seed: str) -> str:
    """The V1 seed with FRC's features, weights and chunked selection (reachable by the linear edits)."""
    out = re.sub(r"^FEATURES = .*$", 'FEATURES = ("local_attn", "density", "max_head")', seed, flags=re.M)
    out = re.sub(r"^WEIGHTS = .*$", "WEIGHTS = (0.55, 0.3, 0.15)", out, flags=re.M)
    return re.sub(r"^SELECTION = .*$", 'SELECTION = "chunked"', out, flags=re.M)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--board", default="A")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--arena-root")
    args = parser.parse_args()

    trace = [json.loads(line) for line in (Path(args.run) / "evolution_trace.jsonl").read_text().splitlines()]
    valid = sorted((t for t in trace if t["child_metrics"]["valid"] and t["child_metrics"]["combined_score"] > 0),
                   key=lambda t: -t["child_metrics"]["combined_score"])
    seed = seed_path("v1").read_text()
    programs = {"seed": seed, "frc (seed form)": frc_in_seed_form(seed)}
    for t in valid:
        if len(programs) >= args.top + 2:
            break
        if t["child_code"] not in programs.values():
            programs[t["child_id"]] = t["child_code"]

    fit = load_board_fitness(args.board, profile=args.profile, root=args.arena_root, gate=0.0)
    converted = {label: fit.convert(code) for label, code in programs.items()}
    rows = fit.runner.run(fit.items, [fit.candidate(c) for c in converted.values()])
    fit.runner.close()
    contexts = list(dict.fromkeys(fit.items.context_id))
    halves = [set(contexts[0::2]), set(contexts[1::2])]
    table = []
    for label, c in converted.items():
        mine = rows[rows.method == c.name]
        report = fit.report(mine, c.name)
        gain = report["gain"]
        line = {"program": label, "dev": float(report["scores"].loc[c.name, "overall"]),
                f"gain over {report['best_baseline']}": f"{gain.point:+.3f} [{gain.lo:+.3f}, {gain.hi:+.3f}]"}
        for h, ids in enumerate(halves):
            base = fit.base[fit.base.context_id.isin(ids)]
            rep = dev_report(base, mine[mine.context_id.isin(ids)], fit.board, c.name)
            line[f"half {h}"] = float(rep["scores"].loc[c.name, "overall"])
        table.append(line)
    frame = pd.DataFrame(table)
    print(frame.to_string(index=False))
    a, b = frame["half 0"].to_numpy(), frame["half 1"].to_numpy()
    rng = np.random.default_rng(0)
    boots = [spearman(a[i], b[i]) for i in (rng.integers(0, len(a), len(a)) for _ in range(2000))]
    boots = [x for x in boots if np.isfinite(x)]
    print(f"Spearman(half 0, half 1) over {len(a)} programs: {spearman(a, b):.2f} "
          f"[{np.quantile(boots, 0.025):.2f}, {np.quantile(boots, 0.975):.2f}] (bootstrap over programs)")


if __name__ == "__main__":
    main()
