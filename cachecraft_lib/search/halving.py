"""The paper's cascade as successive halving over dev contexts.

Why: the plain cascade (``BoardFitness.evaluate``) gates on the first dev context of each task and then scores
every child that passes on all dev contexts; with the seed-scaled gate nearly every child passes, so every child
costs a full dev evaluation. Here a generation's children are first scored on a few contexts (a rung), only the
best ``1/eta`` go on to the next rung (twice the contexts), and only the last rung's survivors are scored on all
the fitness's contexts: a child culled early costs only its share of a full evaluation.

Rungs are prefixes of one context order: the first context of each task (the gate contexts, in task order), then
the second of each task, and so on, so every prefix spreads over the tasks. The rung sizes start at half the
tasks and double up to all the contexts (``rung_sizes``). At the first rung that holds every gate context the
cascade's gate applies as in ``BoardFitness`` (a child below it stops there, ``passed_gate`` false). A child
that reaches the last rung gets exactly ``BoardFitness.evaluate``'s result: its rows in the same order, scored by
the same ``dev_report`` (tests compare the two).

Torch runs on one thread while a generation is screened (``THREADS``): on two cores shared with other work, its
default two threads spin-wait on each other, and the population path's decode loops are small (a rung's few
children): decoding 48 cached rows took 29.4 CPU seconds on two threads and 1.5 on one, with the same answers (the
prefill, the features and every decoded answer are bit for bit the same; ``bench_search.check_fast_path`` compares a
screen on one thread with the plain cascade on torch's default, every run).

Cost is counted in context evaluations (one candidate's run on one context, every budget); a full evaluation costs
as many as the fitness has contexts, so ``cost / contexts`` is the honest count of evaluations. A candidate's rows
are kept by its name, so a program screened again later costs only the contexts it has not run yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ..arena.scoring.score import unit_values
from .board_fitness import BoardFitness, _Converted
from .candidate_result import CandidateResult, candidate_name
from .policy_batch import shares_features
from .threads import THREADS, torch_threads  # noqa: F401  (torch_threads: bench_search imports it from here)

ETA = 3  # keep the best third at each rung (Hyperband's usual eta)
def context_order(items: pd.DataFrame) -> list[str]:
    """Contexts round robin over tasks: each task's first context (the gate contexts), then each one's second..."""
    per_task = items.drop_duplicates("context_id").groupby("task", sort=False).context_id.apply(list)
    order: list[str] = []
    for depth in range(max(len(v) for v in per_task)):
        order += [v[depth] for v in per_task if depth < len(v)]
    return order


def rung_sizes(n_contexts: int, n_tasks: int, first: int | None = None) -> list[int]:
    """Context counts of the rungs: from ``first`` (default half the tasks, at least 1), doubling, the last one all
    ``n_contexts``."""
    sizes, n = [], max(1, n_tasks // 2 if first is None else first)
    while n < n_contexts:
        sizes.append(n)
        n *= 2
    return sizes + [n_contexts]


@dataclass
class Screened:
    """One child after screening: its result (``fitness`` set only when it reached the last rung and passed the
    gate), its score at each rung it reached, and the context evaluations it cost in this call."""

    source: str
    result: CandidateResult
    scores: list[float] = field(default_factory=list)
    contexts_run: int = 0

    @property
    def rung(self) -> int:
        """The deepest rung reached (0-based; -1 when it never ran)."""
        return len(self.scores) - 1

    @property
    def partial(self) -> float | None:
        """The score at the deepest rung reached (None when it never ran)."""
        return self.scores[-1] if self.scores else None

    @property
    def full(self) -> bool:
        return self.result.fitness is not None


class Halving:
    """Successive halving over ``fitness``'s dev contexts. ``screen`` takes a generation's programs; ``eta``: the
    share kept at each rung is ``1/eta``; ``first``: the first rung's context count (default: half the tasks);
    ``threads``: torch threads while screening (``THREADS``; ``None``: torch's setting as it is)."""

    def __init__(self, fitness: BoardFitness, eta: int = ETA, first: int | None = None,
                 threads: int | None = THREADS) -> None:
        if eta < 2:
            raise ValueError(f"eta must be at least 2, got {eta}")
        self.fit, self.eta, self.threads = fitness, eta, threads
        self.order = context_order(fitness.items)
        if set(self.order[:len(fitness.gate_ids)]) != set(fitness.gate_ids):
            raise ValueError("the context order must start with the gate contexts")
        tasks = fitness.items.task.nunique()
        self.sizes = rung_sizes(len(self.order), tasks, first)
        self.gate_rung = next(i for i, n in enumerate(self.sizes) if n >= len(fitness.gate_ids))
        plain = fitness.gate_ids + [c for c in dict.fromkeys(fitness.items.context_id) if c not in fitness.gate_ids]
        self._rank = {c: i for i, c in enumerate(plain)}  # BoardFitness.evaluate's row order (gate items first)
        self._rows: dict[str, pd.DataFrame] = {}  # a candidate's rows so far, by name
        self._done: dict[str, tuple[CandidateResult, list[float]]] = {}  # final results, by name
        self.context_runs = 0  # every context evaluation this object ran

    @property
    def contexts(self) -> int:
        """Context evaluations in one full evaluation."""
        return len(self.order)

    # ------------------------------------------------------------------------------------------- scoring
    def partial_scores(self, names: list[str], n: int) -> dict[str, float]:
        """Each candidate's overall on the first ``n`` contexts (the dev report's statistic, on those contexts)."""
        keep = set(self.order[:n])
        base = self.fit.base[self.fit.base.context_id.isin(keep)]
        mine = [self._rows[m][self._rows[m].context_id.isin(keep)] for m in names]
        try:
            units = unit_values(pd.concat([base, *mine], ignore_index=True), self.fit.board)
        except ValueError:  # every task of these few contexts excluded (full cache below the floor): no ranking
            return {m: 0.0 for m in names}
        by_task = units[units.method.isin(names)].groupby(["method", "task"]).overall.mean()
        means = by_task.groupby("method").mean()
        return {m: float(means[m]) for m in names}

    def _rows_in_plain_order(self, name: str) -> pd.DataFrame:
        rows = self._rows[name]
        rank = rows.context_id.map(self._rank)
        return rows.iloc[rank.argsort(kind="stable")].reset_index(drop=True)

    def _run(self, live: dict[str, _Converted], n: int, failed: dict[str, str]) -> None:
        """Run the live candidates on those of the first ``n`` contexts they have not run yet (one batched pass
        per set of missing contexts: usually one)."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for name in live:
            held = set(self._rows[name].context_id) if name in self._rows else set()
            todo = tuple(c for c in self.order[:n] if c not in held)
            if todo:
                groups.setdefault(todo, []).append(name)
        for todo, names in groups.items():
            items = self.fit.items[self.fit.items.context_id.isin(todo)]
            rows = self.fit.runner.run(items, [self.fit.candidate(live[m]) for m in names])
            self.context_runs += len(todo) * len(names)
            for name in names:
                if name in self.fit.runner.failures:
                    failed[name] = self.fit.runner.failures[name]
                    continue
                mine = rows[rows.method == name]
                old = self._rows.get(name)
                self._rows[name] = mine if old is None else pd.concat([old, mine], ignore_index=True)

    # ------------------------------------------------------------------------------------------ screening
    def screen(self, sources: list[str]) -> list[Screened]:
        """The generation ``sources`` through the rungs; results in the order of ``sources`` (a program given twice
        is screened once). Sandboxes are closed at the end, as ``BoardFitness.evaluate`` does."""
        try:
            with torch_threads(self.threads):
                return self._screen(sources)
        finally:
            self.fit.runner.close()

    def _held(self, name: str) -> int:
        return self._rows[name].context_id.nunique() if name in self._rows else 0

    def _screen(self, sources: list[str]) -> list[Screened]:
        out: dict[str, Screened] = {}
        live: dict[str, _Converted] = {}
        for src in dict.fromkeys(sources):
            c = self.fit._checked(src)
            if isinstance(c, CandidateResult):
                out[src] = Screened(src, c)
            elif c.name in self._done:
                result, scores = self._done[c.name]
                out[src] = Screened(src, result, list(scores))
            elif not shares_features(c.submission.source):  # its own feature code: one at a time, in full
                out[src] = Screened(src, self.fit.evaluate_one(src), contexts_run=self.contexts)
                self.context_runs += self.contexts
            elif c.name not in live:
                live[c.name] = c
        source_of = {candidate_name(src): src for src in dict.fromkeys(sources) if src not in out}
        held = {name: self._held(name) for name in live}
        scores, results = self._rungs(live, source_of)
        for name, src in source_of.items():
            result = results.get(name) or CandidateResult(name, True, 1, self.fit.gate)
            out[src] = Screened(src, result, scores.get(name, []), self._held(name) - held.get(name, 0))
            stopped = result.fitness is not None or not result.valid or (result.gate_score is not None
                                                                         and not result.passed_gate)
            if stopped:  # final: screening it again costs nothing (a culled child may go on later)
                self._done[name] = (result, scores.get(name, []))
        return [out[s] for s in sources]

    def _rungs(self, live: dict[str, _Converted], source_of: dict[str, str]
               ) -> tuple[dict[str, list[float]], dict[str, CandidateResult]]:
        """Each live candidate's scores by rung and its result (culled ones: valid, stage 1, no fitness)."""
        scores: dict[str, list[float]] = {name: [] for name in live}
        results: dict[str, CandidateResult] = {}
        for k, n in enumerate(self.sizes):
            failed: dict[str, str] = {}
            self._run(live, n, failed)
            for name, failure in failed.items():
                results[name] = CandidateResult(name, False, 1 if k <= self.gate_rung else 2, self.fit.gate,
                                                failure_kind=failure.split(":")[0], reason=failure)
                live.pop(name)
            if not live:
                break
            now = self.partial_scores(list(live), n)
            for name, score in now.items():
                scores[name].append(score)
            if k == self.gate_rung:
                self._apply_gate(live, results)
            if k == len(self.sizes) - 1:
                for name in live:
                    results[name] = self._final(name, results.get(name))
                break
            keep = max(1, math.ceil(len(live) / self.eta))
            ranked = sorted(live, key=lambda m: (-now[m], source_of[m]))  # ties: by source text, deterministic
            live = {m: live[m] for m in ranked[:keep]}
        return scores, results

    def _apply_gate(self, live: dict[str, _Converted], results: dict[str, CandidateResult]) -> None:
        """The cascade's gate on the gate contexts: a child below it stops here (valid, ``passed_gate`` false)."""
        for name in list(live):
            score = self._gate_score(name)
            results[name] = CandidateResult(name, True, 1, self.fit.gate, gate_score=score)
            if score < self.fit.gate:
                live.pop(name)

    def _gate_score(self, name: str) -> float:
        """The candidate's score on the gate items, exactly as ``BoardFitness`` computes it."""
        rows = self._rows[name]
        mine = rows[rows.context_id.isin(self.fit.gate_ids)]
        mine = mine.iloc[mine.context_id.map(self._rank).argsort(kind="stable")]
        return float(self.fit.report(mine, name, gate_only=True)["scores"].loc[name, "overall"])

    def _final(self, name: str, gated: CandidateResult | None) -> CandidateResult:
        """The last rung: ``BoardFitness.evaluate``'s stage-2 result from the same rows in the same order."""
        rep = self.fit.report(self._rows_in_plain_order(name), name)
        gate_score = gated.gate_score if gated is not None else self._gate_score(name)
        result = CandidateResult(name, True, 2, self.fit.gate, gate_score=gate_score, report=rep)
        result.fitness = float(rep["scores"].loc[name, "overall"])
        return result
