"""Read a search run folder into pandas tables and compute its dynamics (notebook 05).

Sources: ``evolution_trace.jsonl`` (every admitted child, with metrics, artifacts, code and the mutator's
answer), ``evolution_trace_failures.jsonl`` (iterations that produced no child), the last checkpoint's
programs, and ``run_info.txt``.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .mutator import parse_scorer

FRC_FEATURES = ("local_attn", "density", "max_head")
HACK_RE = re.compile(r"# hack: (\w+)")
REPLACE_RE = re.compile(r"\n=======\n(.*?)\n>>>>>>> REPLACE", re.S)
CHANGE_RE = re.compile(r"Proposed change: (.+)")


@dataclass
class Run:
    folder: Path
    info: dict[str, str]
    trace: pd.DataFrame
    failures: pd.DataFrame
    seed_code: str


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line of an interrupted run
    return rows


def frc_share(features: tuple | None, weights: tuple | None) -> float:
    """Share of the absolute weight on FRC's three signals (local, density, max-head)."""
    if not features or not weights:
        return np.nan
    total = sum(abs(w) for w in weights)
    return sum(abs(w) for f, w in zip(features, weights, strict=False) if f in FRC_FEATURES) / total if total else np.nan


def proposed_hack(response: str) -> re.Match | None:
    """The hack a response proposes: a ``# hack:`` tag in a REPLACE part (a tag only in a SEARCH part
    is the mutator repairing a hacked parent, not a new hack)."""
    for block in REPLACE_RE.findall(response):
        if match := HACK_RE.search(block):
            return match
    return None


def _row(rec: dict) -> dict:
    m = rec.get("child_metrics") or {}
    art = rec.get("artifacts") or {}
    response = rec.get("llm_response") or ""
    code = rec.get("child_code") or ""
    scorer = parse_scorer(code) or {}
    hack = proposed_hack(response)
    change = CHANGE_RE.search(response)
    return {
        "iteration": rec.get("iteration"), "island": rec.get("island_id"), "generation": rec.get("generation"),
        "parent_id": rec.get("parent_id"), "child_id": rec.get("child_id"),
        "fitness": m.get("combined_score", 0.0), "s1": m.get("s1", np.nan), "s2": m.get("s2", np.nan),
        "valid": bool(m.get("valid", 0.0)), "passed_gate": bool(m.get("passed_gate", 0.0)),
        "timeout": bool(m.get("timeout", False)), "invalid_reason": art.get("invalid", ""),
        "failure_kind": art.get("failure_kind", ""), "hack": hack.group(1) if hack else "",
        "hack_in_child": bool(hack and hack.group(0) in code), "change": change.group(1) if change else "",
        "features": tuple(scorer.get("FEATURES", ())) or None, "weights": tuple(scorer.get("WEIGHTS", ())) or None,
        "selection": scorer.get("SELECTION"), "code": code,
    }


def load_run(folder: str | Path) -> Run:
    """The run's trace (one row per child), failures and metadata; raises if the folder is not a run."""
    folder = Path(folder)
    trace_path = folder / "evolution_trace.jsonl"
    if not trace_path.exists():
        raise FileNotFoundError(f"{folder} has no evolution_trace.jsonl: not a search run (run `cachecraft evolve`)")
    trace = pd.DataFrame([_row(r) for r in _jsonl(trace_path)])
    if len(trace):
        trace = trace.sort_values("iteration").reset_index(drop=True)
        trace["frc_share"] = [frc_share(f, w) for f, w in zip(trace.features, trace.weights, strict=True)]
        trace["best_so_far"] = trace.fitness.cummax()
        trace["island_best_so_far"] = trace.groupby("island").fitness.cummax()
    failures = pd.DataFrame(_jsonl(folder / "evolution_trace_failures.jsonl"))
    info = {}
    if (folder / "run_info.txt").exists():
        info = dict(line.split("=", 1) for line in (folder / "run_info.txt").read_text().splitlines() if "=" in line)
    seed_code = (folder / "initial_program.py").read_text() if (folder / "initial_program.py").exists() else ""
    return Run(folder, info, trace, failures, seed_code)


def children_evaluations(folder: str | Path) -> float:
    """What a board search run's children cost, in evaluations (one: a program on every context of the fitness; a
    child culled by successive halving counts its share): ``generations.csv``'s last ``evaluations`` less the seed's
    (its generation 0); a run without that column counts one per child, as the generational engine's were. The
    budget a control at the search's budget gets (``random_control``)."""
    folder = Path(folder)
    gens = pd.read_csv(folder / "generations.csv") if (folder / "generations.csv").exists() else pd.DataFrame()
    if "evaluations" in gens and len(gens):
        return float(gens.evaluations.iloc[-1] - gens.evaluations.iloc[0])
    return float(len(load_run(folder).trace))


def gate_pass_rate(trace: pd.DataFrame) -> float:
    """Share of valid children that passed the stage-1 gate."""
    valid = trace[trace.valid]
    return float(valid.passed_gate.mean()) if len(valid) else float("nan")


def best_child(trace: pd.DataFrame) -> pd.Series:
    return trace.loc[trace.fitness.idxmax()]


def lineage(trace: pd.DataFrame, child_id: str) -> list[str]:
    """Ids from the oldest known ancestor to ``child_id`` (the seed is the parent of generation-1 children)."""
    parent_of = dict(zip(trace.child_id, trace.parent_id, strict=True))
    path = [child_id]
    while path[-1] in parent_of and parent_of[path[-1]] not in path:
        path.append(parent_of[path[-1]])
    return path[::-1]


def diff_from_seed(seed_code: str, code: str) -> str:
    return "".join(difflib.unified_diff(seed_code.splitlines(True), code.splitlines(True), "seed", "best"))


def weight_trajectory(trace: pd.DataFrame) -> pd.DataFrame:
    """Weights of FRC-family children (all three FRC signals present) by iteration."""
    rows = []
    for r in trace.itertuples():
        if r.features and all(f in r.features for f in FRC_FEATURES):
            w = dict(zip(r.features, r.weights, strict=False))
            rows.append({"iteration": r.iteration, **{f: w[f] for f in FRC_FEATURES}, "fitness": r.fitness})
    return pd.DataFrame(rows)


def hacks_caught(run: Run) -> pd.DataFrame:
    """Every hack the mutator proposed and how it was stopped."""
    rows = []
    for r in run.trace[run.trace.hack != ""].itertuples():
        if not r.hack_in_child:
            how = "reverted by OpenEvolve (enforce_evolve_blocks)"
        elif not r.valid:
            how = f"invalid: {r.failure_kind}"
        else:
            how = "NOT CAUGHT"
        rows.append({"iteration": r.iteration, "hack": r.hack, "caught_by": how, "reason": r.invalid_reason[:160]})
    return pd.DataFrame(rows, columns=["iteration", "hack", "caught_by", "reason"])


def spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho (rank correlation) without SciPy; NaN when undefined."""
    frame = pd.DataFrame({"x": x, "y": y}).dropna()
    if len(frame) < 3 or frame.x.nunique() < 2 or frame.y.nunique() < 2:
        return float("nan")
    return float(frame.x.rank().corr(frame.y.rank()))


def frc_share_by_generation(trace: pd.DataFrame) -> tuple[float, float]:
    """Mean FRC weight share of valid linear scorers in the first and the last generation."""
    valid = trace[trace.valid & trace.frc_share.notna()]
    if valid.empty:
        return float("nan"), float("nan")
    first, last = valid.generation.min(), valid.generation.max()
    return float(valid[valid.generation == first].frc_share.mean()), float(valid[valid.generation == last].frc_share.mean())


WALL_CLOCK_KEYS = ("timestamp", "iteration_time", "created_at", "extracted_at")


def _without_wall_clock(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_wall_clock(v) for k, v in value.items() if k not in WALL_CLOCK_KEYS}
    if isinstance(value, list):
        return [_without_wall_clock(v) for v in value]
    return value


def canonical_log(folder: str | Path) -> list[dict]:
    """The run log (trace and failures) with the wall-clock fields removed: what two runs of one seed
    must share exactly (their timestamps and durations differ)."""
    folder = Path(folder)
    return [_without_wall_clock(r) for name in ("evolution_trace.jsonl", "evolution_trace_failures.jsonl")
            for r in _jsonl(folder / name)]


def run_summary(run: Run) -> dict[str, float]:
    """One run's headline numbers: best fitness, Spearman(S1, FRC share), FRC share first/last generation."""
    valid = run.trace[run.trace.valid]
    first, last = frc_share_by_generation(run.trace)
    return {"best_fitness": float(run.trace.fitness.max()) if len(run.trace) else float("nan"),
            "spearman": spearman(valid.s1, valid.frc_share), "frc_share_first": first, "frc_share_last": last}


def seed_spread(runs: dict[int, Run]) -> pd.DataFrame:
    """Per random seed, the run's headline numbers, then (two seeds or more) their median, min and max: one
    run is one sample of a random process, and the spread says how far another seed would land."""
    per_seed = pd.DataFrame({seed: run_summary(run) for seed, run in runs.items()}).T
    per_seed.index = [f"random_seed {s}" for s in per_seed.index]
    if len(runs) < 2:
        return per_seed  # no spread from one sample
    spread = pd.DataFrame({"median": per_seed.median(), "min": per_seed.min(), "max": per_seed.max()}).T
    spread.index = [f"{k} over {len(runs)} seeds" for k in spread.index]
    return pd.concat([per_seed, spread])
