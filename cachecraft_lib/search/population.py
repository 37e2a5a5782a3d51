"""A whole population of candidates on a board's items in one pass per context (issue 38, item 2).

Why: one candidate at a time through ``Arena.dev`` pays, per candidate, every context's prefill, the full
cache's decode, a sandbox start per context and the 17 features rebuilt in its sandbox for every layer and
budget. Here, per dev context, what does not depend on the candidate is computed once and kept in memory across
generations: the prefill (``models.prefill.SharedPrefill``), the full cache's row, and every layer's features
for every budget (``policy_batch.context_features``, built by the converted ``method.py``'s own functions).
Each candidate then only runs its program:

- one sandbox per candidate for the whole evaluation (``MethodSandbox``: the arena's child, boundary and
  limits), with a fresh ``Method`` from a fresh namespace for each context (so a method keeps no state from one
  context to the next, as the arena's fresh sandbox per context ensures);
- one sandbox call per context answers every layer and budget of the board (``keep_context``: a fresh
  ``Method``, then ``keep_features`` layer by layer; its CPU limit is the per-layer limit times the budgets and
  layers); the indices are validated here and gathered from the shared prefill exactly as the arena's keep
  press would (``policy_batch.kept_cache_row``: ``KeptIndicesPress``'s cache, element for element);
- the compressed caches of all candidates x budgets of up to ``CONTEXTS_PER_DECODE`` contexts are decoded
  together by the grid's batched engine (``grid.decode.decode_rows``), the rows of one cache width together,
  up to ``CPU_DECODE_ROWS`` per greedy loop on CPU (no padding, few loops); two candidates (or generations) whose validated indices are the
  same on every layer at a budget have the same cache, so it is decoded once and its answers reused
  (``selection_digest``; ``memo_hits`` counts them); the full cache's answers come from the board's cached
  baseline rows, as in ``arena dev``.

A candidate that fails on a context (hang, memory, out-of-range indices: any ``SubmissionError``) is refused
there and left out of the following contexts; the others' rows do not change. The rows have the columns of
``arena.board_runner.BoardRunner`` and are scored by the same ``arena.score.dev_report``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..arena.board_runner import (
    CONTEXTS_PER_DECODE,
    ROW_COLUMNS,
    BoardRunner,
    CacheStats,
    PendingRow,
    PrefillFacts,
    count_flops,
)
from ..arena.submissions.folder import Submission, SubmissionError
from ..arena.submissions.sandbox import Limits, MethodSandbox, validate_indices
from ..grid.decode import CacheRow, decode_by_width
from ..models.prefill import SharedPrefill
from ..sandbox import WallBudget
from .policy_batch import LayerFeatures, context_features, kept_cache_row, selection_digest

CPU_DECODE_ROWS = 384  # rows per greedy loop on CPU (a budget's rows of board A's 32 dev contexts)


@dataclass(frozen=True)
class Candidate:
    """A converted policy program on the population path: its submission name, folder and sandbox limits."""

    name: str
    submission: Submission
    limits: dict = field(default_factory=dict)


@dataclass
class _Prepared:
    """What a context costs once: its ids, its shared prefill, the full cache's statistics, every layer's features."""

    question_ids: list[torch.Tensor]
    shared: SharedPrefill
    base: PrefillFacts
    full_stats: CacheStats
    features: list[LayerFeatures]
    press_flops: int  # what the arena's sandboxed press counts on this context, at any budget


@dataclass(frozen=True)
class CacheKey:
    """A context's compressed cache at a budget, named by its validated indices: equal keys, equal answers."""

    context: Any  # the context's id
    budget: float
    digest: str  # ``selection_digest`` of the budget's kept indices over all layers


@dataclass(frozen=True)
class CandidateRows:
    """A candidate's rows at one budget of a context, in output order: the memo's rows at ``key``, renamed."""

    name: str
    key: CacheKey


@dataclass
class PendingCache:
    """A cache waiting for the batched decode: its rows (method unset) and the full cache's statistics they cite."""

    full_stats: CacheStats
    rows: list[PendingRow]


class PopulationRunner(BoardRunner):
    """``BoardRunner`` for many converted candidates at once, with each context's shared work kept across calls."""

    def __init__(self, model: Any, tokenizer: Any, board: Any, batch_size: int | None = None) -> None:
        super().__init__(model, tokenizer, board, batch_size)
        self._prepared: dict[Any, _Prepared] = {}
        self._memo: dict[CacheKey, list[dict]] = {}  # a cache's rows, method unset
        self._boxes: dict[str, MethodSandbox] = {}
        self._start_errors: dict[str, Exception] = {}  # a candidate whose sandbox failed to start (raised at its use)
        self.failures: dict[str, str] = {}
        self.memo_hits = 0
        self.context_runs = 0  # (candidate, context) selections attempted: the honest cost of what ran

    def run(self, items: pd.DataFrame, candidates: list[Candidate], progress: bool = False) -> pd.DataFrame:
        """One row per (candidate, budget, item), no ``no_press`` rows; failed candidates are in ``failures``
        (``name -> "kind: message"``) and have no rows at all. Sandboxes stay open until ``close``. The caches
        of up to ``CONTEXTS_PER_DECODE`` contexts are decoded together (rows of any length mix in a batch)."""
        self.failures = {}
        self._start_all(candidates)
        groups = [group for _, group in items.groupby("context_id", sort=False)]
        rows: list[dict] = []
        for begin in range(0, len(groups), CONTEXTS_PER_DECODE):
            pending: dict[CacheKey, PendingCache] = {}
            plans = [self._select_context(group, candidates, pending)
                     for group in groups[begin:begin + CONTEXTS_PER_DECODE]]
            self._decode(pending)
            rows += [{**record, "method": entry.name} for plan in plans for entry in plan
                     for record in self._memo[entry.key]]
        frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
        return frame[~frame.method.isin(list(self.failures))].reset_index(drop=True)

    def close(self) -> None:
        """End every candidate's sandbox (``BoardFitness.evaluate`` calls it after each population)."""
        for box in self._boxes.values():
            box.close()
        self._boxes, self._start_errors = {}, {}

    def _start_all(self, candidates: list[Candidate]) -> None:
        """Start the candidates' sandboxes side by side: every one is launched (its method sent) before any is
        waited for, so their loads (mostly the child's interpreter and numpy import) overlap. A failure to start
        is kept and raised, unchanged, where the candidate is first used."""
        launched = []
        for c in candidates:
            if c.name in self._boxes or c.name in self._start_errors:
                continue
            limits = Limits.of(**c.limits)
            try:
                box = MethodSandbox(c.submission, limits, budget=WallBudget(limits.wall_s)).launch()
            except SubmissionError as err:
                self._start_errors[c.name] = err
                continue
            launched.append((c, box))
        for c, box in launched:
            try:
                self._boxes[c.name] = box.loaded()
            except SubmissionError as err:
                self._start_errors[c.name] = err

    def prepare(self, group: pd.DataFrame) -> _Prepared:
        """The context's shared state, computed on first use and kept (it depends on the items only)."""
        key = group.iloc[0].context_id
        if key not in self._prepared:
            self._prepared[key] = self._prepare(group)
        return self._prepared[key]

    def _prepare(self, group: pd.DataFrame) -> _Prepared:
        first = group.iloc[0]
        context_ids, question_ids = self.tokenize(group)
        with count_flops() as counter:
            shared = SharedPrefill(self.model, context_ids)
        base = PrefillFacts(shared.context_length, counter.get_total_flops())
        full, _ = self._shared_cache(shared, None)
        row = CacheRow.from_cache(self.model, full, question_ids[0], shared.context_length, int(first.max_new_tokens))
        features, press_flops = context_features(shared, self.board.ratios)
        return _Prepared(question_ids, shared, base, self._stats(row, shared.context_length), features, press_flops)

    def _box(self, c: Candidate) -> MethodSandbox:
        if c.name in self._start_errors:
            raise self._start_errors.pop(c.name)
        box = self._boxes.get(c.name)
        if box is None or not box.alive:
            limits = Limits.of(**c.limits)
            box = self._boxes[c.name] = MethodSandbox(c.submission, limits, budget=WallBudget(limits.wall_s)).start()
        return box

    def select(self, c: Candidate, prep: _Prepared) -> list[dict[int, Any]]:
        """The candidate's validated indices on this context: per budget, ``layer -> (H_kv, n)`` indices. One
        sandbox call for the whole context (``keep_context``: a fresh Method, so no state from the previous
        context, then every layer in order); its CPU limit is the per-layer limit x budgets x layers."""
        box = self._box(c)
        budgets = len(self.board.budgets)
        cpu_s = Limits.of(**c.limits).timeout_s * budgets * len(prep.features)
        arrays = {f"{i}:{k}": a for i, lf in enumerate(prep.features) for k, a in lf.arrays.items()}
        out = box.request("keep_context", arrays, cpu_s=cpu_s, layers=[lf.header() for lf in prep.features])
        expected = {f"{i}:out.{j}" for i in range(len(prep.features)) for j in range(budgets)}
        if set(out) != expected:
            box.close()
            raise SubmissionError("protocol", f"a reply with arrays {sorted(set(out) ^ expected)[:5]} unexpected "
                                              "or missing")
        kept: list[dict[int, Any]] = [{} for _ in self.board.budgets]
        for i, lf in enumerate(prep.features):
            for j, budget in enumerate(lf.budgets):
                kept[j][lf.layer] = validate_indices(out[f"{i}:out.{j}"], lf.heads, lf.n_tokens, budget)
        return kept

    def _select_context(self, group: pd.DataFrame, candidates: list[Candidate],
                        pending: dict[CacheKey, PendingCache]) -> list[CandidateRows]:
        """Every live candidate's selection on one context, in output order; the caches not decoded before go to
        ``pending``."""
        prep = self.prepare(group)
        context = group.iloc[0].context_id
        plan = []
        for c in candidates:
            if c.name in self.failures:
                continue
            self.context_runs += 1
            try:
                kept = self.select(c, prep)
            except SubmissionError as err:  # refused here; the other candidates' rows are untouched
                self.failures[c.name] = f"{err.kind}: {err}"
                if c.name in self._boxes:
                    self._boxes.pop(c.name).close()
                continue
            for keep, ratio, answers in zip(self.board.budgets, self.board.ratios, kept, strict=True):
                key = CacheKey(context, keep, selection_digest(answers))
                plan.append(CandidateRows(c.name, key))
                if key in self._memo or key in pending:
                    self.memo_hits += 1
                else:
                    pending[key] = PendingCache(prep.full_stats, self._rows(c, keep, ratio, answers, prep, group))
        return plan

    def _decode(self, pending: dict[CacheKey, PendingCache]) -> None:
        """Decode every pending cache and keep its rows (method unset) in the memo: rows of one cache width (on a
        board of one length, one budget) together (``decode_by_width``), up to ``CPU_DECODE_ROWS`` per greedy
        loop on CPU."""
        flat = [row.cache for waiting in pending.values() for row in waiting.rows]
        size = self.batch_size or (CPU_DECODE_ROWS if self.model.device.type == "cpu" else None)
        answers = iter(decode_by_width(self.model, self.tokenizer, flat, size))
        for key, waiting in pending.items():
            self._memo[key] = [self._record(r.method, r.budget, r.item, r.overhead_flops, r.cache, next(answers),
                                            waiting.full_stats, r.prefill) for r in waiting.rows]

    def _rows(self, c: Candidate, keep: float, ratio: float, answers: dict, prep: _Prepared,
              group: pd.DataFrame) -> list[PendingRow]:
        """The decode rows of one candidate's cache at ``keep`` (one per item of the context) and its FLOPs."""
        flops = prep.press_flops  # KeptIndicesPress's cache, built without its DynamicCache (``kept_cache_row``)
        template = kept_cache_row(prep.shared, answers, ratio, prep.question_ids[0], prep.shared.context_length,
                                  int(group.iloc[0].max_new_tokens))
        rows = []
        for j, item in enumerate(group.itertuples(index=False)):
            row = template if j == 0 else CacheRow(template.keys, template.values, template.masked,
                                                   prep.question_ids[j].reshape(1, -1), template.start,
                                                   int(item.max_new_tokens))
            rows.append(PendingRow("", keep, item, flops, prep.base, row))
        return rows
