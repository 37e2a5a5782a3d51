"""Board C: methods evict while the model runs, under a hard per-layer cap held by the harness.

Each context is fed through ``decoding.CappedGenerator`` in ``board.chunk``-token forwards under the cap
(``board.cap_for``: a fraction of the context's tokens on the embedded boards, 2048 / 4096 entries on the
paper's), then each question is answered greedily from the same state, the cap still holding. On the
embedded profiles the items are RULER contexts and questions (``items.board_items``: *streaming eviction, not
reasoning*); on the paper profile they are MATH-500 problems (``math500``), where the prompt is short and the
eviction happens while the reasoning model writes up to ``max_new_tokens`` tokens. The full cache is the same
run without a cap.

Rows have the columns of the prefill boards (``board_runner.ROW_COLUMNS``), so ``score`` scores them the same way,
plus the generated length (``G``) and the cap:

- ``logical_entries`` = ``physical_entries``: the largest cache any forward attended over, summed over layers
  and KV heads (the cap times layers and heads once it binds), against the full cache's peak;
- ``read_entries``: entries attended per generated token (mean over the answer's forwards), against full's;
- ``overhead_flops``: floating-point work of the trusted methods' eviction (scoring at each overflow),
  against ``prefill_flops`` = the full cache's whole run on the item; a sandboxed method's own work is not
  counted (its CPU time is bounded by the sandbox), as on boards A and B;
- ``generated_tokens``: tokens of the answer.

The harness checks every run's peak against its cap and stops with an error if a layer ever exceeded it.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pandas as pd
import torch
from kvpress import KVPressTextGenerationPipeline

from ..decoding.capped import CappedGenerator, cap_method
from ..grid.decode import stop_ids
from ..methods.registry import NO_PRESS
from .board_runner import ROW_COLUMNS, Contender, count_flops, over_contexts
from .boards.boards import Board

C_COLUMNS = ROW_COLUMNS + ["generated_tokens", "cap", "max_cache"]


class CapExceeded(RuntimeError):
    """A run attended over more entries than its cap: a harness bug, never a method's score."""


def score_answer(task: str, answer: str, refs: Any) -> float:
    """0-100: RULER's metric for RULER tasks, the math-answer checker (pass@1) for MATH-500."""
    if task == "math500":
        from .boards.math_answers import grade

        return 100.0 * grade(answer, list(refs)[0])
    from ..ruler.scoring import as_refs, clean_prediction, metric_for

    return float(metric_for(task)([clean_prediction(answer)], [as_refs(refs)]))


class DecodeBoardRunner:
    """Evaluates decode-time contenders (``Contender.decode``) on items of board C with one model."""

    def __init__(self, model: Any, tokenizer: Any, board: Board) -> None:
        if not board.decode_time:
            raise ValueError(f"board {board.name} is not a decode-time board")
        self.model, self.tokenizer, self.board = model, tokenizer, board
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.entry_bytes = 2 * head_dim * next(model.parameters()).element_size()  # a key and a value
        self.stop = stop_ids(model)
        self.device = next(model.parameters()).device

    def run(self, items: pd.DataFrame, contenders: Iterable[Contender], progress: bool = True) -> pd.DataFrame:
        """One row per (contender, cap, item); the full cache always runs (budget 1.0, method ``full``)."""
        contenders = [c for c in contenders if c.name != NO_PRESS]
        for c in contenders:
            if c.decode is not None:
                continue
            if c.kind == "submission":
                from .submissions.folder import SubmissionError

                raise SubmissionError("bad_method", f"board {self.board.name} evicts while decoding: class Method "
                                                    "must define decode(layer)")
            from .boards.boards import BoardError

            raise BoardError(f"{c.name} has no decode-time method; board {self.board.name}'s baselines: "
                             f"{', '.join(self.board.baselines)}")
        rows = over_contexts(items, lambda group: self._context(group, contenders), self.board.name, progress)
        return pd.DataFrame(rows, columns=C_COLUMNS)

    def _context(self, group: pd.DataFrame, contenders: list[Contender]) -> list[dict]:
        first = group.iloc[0]
        ids = KVPressTextGenerationPipeline.preprocess(SimpleNamespace(tokenizer=self.tokenizer), first.context,
                                                       list(group.question), first.answer_prefix,
                                                       max_context_length=10**9)
        context_ids = ids["context_ids"].to(self.device)
        n = context_ids.shape[1]
        with count_flops() as counter:
            full = self._answers(cap_method(NO_PRESS), None, context_ids, ids["questions_ids"], group)
        per_item = counter.get_total_flops() / len(group)
        out = [self._row(NO_PRESS, 1.0, item, res, full[j], per_item) for j, (item, res) in
               enumerate(zip(group.itertuples(index=False), full, strict=True))]
        for c in contenders:
            for budget in self.board.budgets:
                cap = self.board.cap_for(budget, n)
                runs = self._answers(c.decode(), cap, context_ids, ids["questions_ids"], group)
                out += [self._row(c.name, budget, item, res, full[j], per_item) for j, (item, res) in
                        enumerate(zip(group.itertuples(index=False), runs, strict=True))]
        return out

    @torch.no_grad()
    def _answers(self, method, cap: int | None, context_ids: torch.Tensor, questions: list[torch.Tensor],
                 group: pd.DataFrame) -> list[dict]:
        gen = CappedGenerator(self.model, method, cap=cap, chunk=self.board.chunk, count_flops=cap is not None,
                              slack=self.board.slack if cap is not None else 0)
        gen.feed(context_ids)
        state, flops_context = gen.snapshot(), gen.evict_flops
        results = []
        for q_ids, item in zip(questions, group.itertuples(index=False), strict=True):
            gen.restore(state)
            gen.evict_flops = 0
            tokens = gen.generate(q_ids.to(self.device), int(item.max_new_tokens), self.stop)
            peaks = gen.max_cache_lengths()
            if cap is not None and max(peaks) > cap:
                raise CapExceeded(f"{method.name}: a layer attended over {max(peaks)} entries under a cap of {cap}")
            heads = [la.keys.shape[1] for la in gen.cache.layers]
            results.append({"answer": str(self.tokenizer.decode(tokens, skip_special_tokens=True)),
                            "generated": len(tokens), "peak": sum(p * h for p, h in zip(peaks, heads, strict=True)),
                            "reads": sum(gen.reads) / max(1, len(gen.reads)),
                            "flops": gen.evict_flops + flops_context / len(questions), "cap": cap,
                            "max_cache": max(peaks)})
        return results

    def _row(self, name: str, budget: float, item: Any, res: dict, full: dict, full_flops: float) -> dict:
        return {"method": name, "budget": budget, "item": item.item, "context_id": item.context_id,
                "task": item.task, "length": item.length, "score": score_answer(item.task, res["answer"], item.answer),
                "predicted_answer": res["answer"], "logical_entries": res["peak"], "physical_entries": res["peak"],
                "full_entries": full["peak"], "kv_bytes": res["peak"] * self.entry_bytes,
                "full_kv_bytes": full["peak"] * self.entry_bytes, "read_entries": res["reads"],
                "full_read_entries": full["reads"], "overhead_flops": int(res["flops"]),
                "prefill_flops": int(full_flops), "generated_tokens": res["generated"],
                "cap": res["cap"], "max_cache": res["max_cache"]}
