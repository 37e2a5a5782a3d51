"""A whole population of candidates on a board's items in one pass per context (issue 38, item 2).

Why: one candidate at a time through ``Arena.dev`` pays, per candidate, every context's prefill, the full
cache's decode and one decode batch of its own budgets. Here, per dev context:

- the prefill (``models.prefill.SharedPrefill``: every layer's hidden states, keys and values, which is what each
  press's hook sees) and the full cache's row are computed once and kept in memory across generations;
- each candidate only computes its selection: its real KVPress press (``arena.submissions.press.submission_press``, the
  arena's sandbox, outputs validated outside) compresses the shared prefill, budget by budget;
- the compressed caches of all candidates x budgets of the context are decoded in one batch by the grid's
  batched engine (``grid.decode.decode_rows``); the full cache's answers come from the board's cached
  baseline rows, as in ``arena dev``.

A candidate that fails on a context (hang, memory, out-of-range indices: any ``SubmissionError``) is refused
there and left out of the following contexts; the others' rows do not change. The rows have the columns of
``arena.board_runner.BoardRunner`` and are scored by the same ``arena.score.dev_report``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ..arena.board_runner import ROW_COLUMNS, BoardRunner, Contender, count_flops, over_contexts
from ..arena.submissions.folder import SubmissionError
from ..grid.decode import CacheRow, decode_rows
from ..methods.registry import NO_PRESS
from ..models.prefill import SharedPrefill


@dataclass
class _Prepared:
    """What a context costs once: its ids, its shared prefill, the full cache's row and statistics."""

    question_ids: list[torch.Tensor]
    shared: SharedPrefill
    base: dict[str, int]
    full_stats: dict[str, int]


class PopulationRunner(BoardRunner):
    """``BoardRunner`` for many candidates at once, with each context's prefill kept across calls."""

    def __init__(self, model: Any, tokenizer: Any, board: Any, batch_size: int | None = None) -> None:
        super().__init__(model, tokenizer, board, batch_size)
        self._prepared: dict[Any, _Prepared] = {}
        self.failures: dict[str, str] = {}

    def run(self, items: pd.DataFrame, contenders: list[Contender], progress: bool = False) -> pd.DataFrame:
        """One row per (contender, budget, item), no ``full`` rows; failed contenders are in ``failures``
        (``name -> "kind: message"``) and have no rows at all."""
        self.failures = {}
        live = [c for c in contenders if c.name != NO_PRESS]
        rows = over_contexts(items, lambda group: self._population(group, live), self.board.name, progress)
        frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
        return frame[~frame.method.isin(list(self.failures))].reset_index(drop=True)

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
        base = {"context_length": shared.context_length, "prefill_flops": counter.get_total_flops()}
        full, _ = self._shared_cache(shared, None)
        row = CacheRow.from_cache(self.model, full, question_ids[0], shared.context_length, int(first.max_new_tokens))
        return _Prepared(question_ids, shared, base, self._stats(row, shared.context_length))

    def _population(self, group: pd.DataFrame, contenders: list[Contender]) -> list[dict]:
        prep = self.prepare(group)
        first = group.iloc[0]
        decode_rows_, meta = [], []
        for c in contenders:
            if c.name in self.failures:
                continue
            try:
                templates = [(keep, *self._candidate_row(c, keep, prep, int(first.max_new_tokens)))
                             for keep in self.board.budgets]
            except SubmissionError as err:  # refused here; the other candidates' rows are untouched
                self.failures[c.name] = f"{err.kind}: {err}"
                continue
            for keep, template, flops in templates:
                for j, item in enumerate(group.itertuples(index=False)):
                    row = template if j == 0 else CacheRow(template.keys, template.values, template.masked,
                                                           prep.question_ids[j].reshape(1, -1), template.start,
                                                           int(item.max_new_tokens))
                    decode_rows_.append(row)
                    meta.append((c.name, keep, item, flops, row))
        answers = decode_rows(self.model, self.tokenizer, decode_rows_, self.batch_size)
        return [self._record(name, keep, item, flops, row, answer, prep.full_stats, prep.base)
                for (name, keep, item, flops, row), answer in zip(meta, answers, strict=True)]

    def _candidate_row(self, c: Contender, keep: float, prep: _Prepared, max_new_tokens: int) -> tuple[CacheRow, int]:
        """The candidate's compressed cache at ``keep`` as a decode row (read at once: a head-wise press leaves
        its masks on the model until the next press), and its compression FLOPs."""
        if c.own_prefill:
            raise SubmissionError("bad_method", f"{c.name} replays the context itself; not a population candidate")
        cache, flops = self._shared_cache(prep.shared, c.build(round(1.0 - keep, 6)))
        row = CacheRow.from_cache(self.model, cache, prep.question_ids[0], prep.shared.context_length, max_new_tokens)
        return row, flops
