"""Run methods on a board's items: one shared prefill per context, every method x budget compressed from it,
one batched decode of the caches of many contexts (``grid.decode.decode_by_width``), RULER's metric per answer.

Why this path and not KVPress's pipeline per item: it is the grid's path (``prefill.SharedPrefill``, the same
``CacheRow``s), so a submission is scored exactly as the suite scores every baseline, and a board of several
methods and budgets costs one prefill per context. On B boards one compressed cache answers all of the
context's questions (they join the same batch).

Beside each answer's score it records deterministic efficiency measures (CPU wall clock cannot be scored:
the same work took 1.5 s in one run and 19-43 s in another on these machines):

- ``logical_entries``: KV entries (all layers and KV heads) the method kept; masked entries do not count;
- ``physical_entries`` / ``kv_bytes``: what the cache actually holds (a key-masking press, AdaKV or KVzip,
  keeps every entry physically);
- ``read_entries``: entries attention reads for the first decoded token (physical cache + question);
- ``overhead_flops``: floating-point operations of the compression (``torch.utils.flop_counter``, attention
  counted) next to ``prefill_flops``. Work a sandboxed submission does in its own process is not counted
  here (its CPU time is bounded by the sandbox's limits); on a GPU, timings replace these proxies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from kvpress import BasePress
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from ..grid.decode import CacheRow, decode_by_width
from ..methods.registry import NO_PRESS, arena_baselines, get_method
from ..models.pipeline import make_pipeline
from ..models.prefill import SharedPrefill
from ..ruler.scoring import as_refs, clean_prediction, metric_for
from ..util.progress import tqdm
from .boards.boards import Board

ROW_COLUMNS = ["method", "budget", "item", "context_id", "task", "length", "score", "predicted_answer",
               "logical_entries", "physical_entries", "full_entries", "kv_bytes", "full_kv_bytes",
               "read_entries", "full_read_entries", "overhead_flops", "prefill_flops"]


@dataclass(frozen=True)
class PrefillFacts:
    """What a context's shared prefill measured; every row of the context reports it."""

    context_length: int  # tokens of the context (the question too on a query-aware board)
    prefill_flops: int


@dataclass(frozen=True)
class CacheStats:
    """What a compressed cache holds and what attention reads from it (the module doc's efficiency measures)."""

    logical_entries: int  # entries kept, masked ones not counted
    physical_entries: int  # entries the cache tensors hold
    kv_bytes: int
    read_entries: int  # physical entries + the question's, read by the first decoded token
    question_entries: int


@dataclass(frozen=True)
class PendingRow:
    """One (cache, question) of a context waiting for the batched decode: a method at a budget on an item."""

    method: str
    budget: float  # fraction of the cache kept (1.0: the full cache)
    item: Any  # the item's row (``DataFrame.itertuples``): task, answer, item id...
    overhead_flops: int  # the compression's work (beyond the prefill)
    prefill: PrefillFacts
    cache: CacheRow


@dataclass(frozen=True)
class Contender:
    """A method on a board: how to build its press for a compression ratio (``None`` = full cache)."""

    name: str
    build: Callable[[float], BasePress | None]
    kind: str = "baseline"  # baseline | submission
    own_prefill: bool = False  # replays the context itself (KVzip): cannot use the shared prefill
    masks_keys: bool = False
    decode: Callable[[], Any] | None = None  # board C: a fresh ``decoding.CapMethod`` (None: no decode-time method)
    probes: tuple[str, ...] = ()  # a submission's probe texts (never a question on query-agnostic boards)
    build_whole: Callable[[float], BasePress] | None = None  # the whole-cache hook, on boards that allow it

    def press_for(self, board: Board) -> Callable[[float], BasePress | None]:
        """The build this board runs: the whole-cache hook where the board's rules allow it, else ``build``."""
        return self.build_whole if self.build_whole is not None and board.allows_whole_cache else self.build


def _no_prefill(name: str) -> Callable[[float], BasePress | None]:
    def build(ratio: float) -> BasePress | None:
        raise ValueError(f"{name} is a decode-time method only (board C); it has no prefill press")

    return build


def over_contexts(items: pd.DataFrame, one: Callable[[pd.DataFrame], list[dict]], board: str,
                  progress: bool) -> list[dict]:
    """The rows of ``one(group)`` for each context of ``items`` in order (one progress bar for both runners).
    Every submission's sandbox ends before each context: a method keeps no state from one context to the next
    (it cannot count contexts, nor tell a split by their number)."""
    from .submissions.press import close_sandboxes, start_evaluation

    start_evaluation()  # one wall-clock budget per submission for the whole evaluation, not per context
    rows: list[dict] = []
    groups = list(items.groupby("context_id", sort=False))
    for _, group in tqdm(groups, desc=f"board {board}: contexts", disable=not progress, leave=False):
        close_sandboxes()
        rows += one(group)
    close_sandboxes()
    return rows


def baseline_contender(name: str) -> Contender:
    """A trusted baseline by name (``methods.registry``): its prefill press (boards A, B) and/or its decode-time
    method (board C)."""
    from ..decoding.capped import cap_method

    m = get_method(name)
    if not m.arena_baseline:
        raise ValueError(f"{name} is not one of the arena's baselines; known: {', '.join(arena_baselines())}, "
                         f"{', '.join(arena_baselines(decode_time=True))}")
    decode = (lambda: cap_method(name)) if m.decode_time else None
    build = m.build if m.prefill else _no_prefill(name)
    return Contender(name, build, "baseline", m.own_prefill, m.masks_keys, decode=decode)


def submission_contender(sub: Any, **limits: Any) -> Contender:
    """A checked submission (``submission.Submission``) through the arena's sandboxed press; on board C its
    ``decode`` hook through the capped generator (``arena.decode``)."""
    from .submissions.press import submission_press

    decode = None
    if getattr(sub, "decode", False):
        from .decode import submission_cap_method

        decode = lambda: submission_cap_method(sub, **limits)  # noqa: E731
    build = (lambda ratio: submission_press(sub, ratio, **limits)) if sub.returns != "none" else _no_prefill(sub.name)
    probes = tuple(getattr(sub, "probes", ()) or ())
    if probes and sub.returns != "none":
        from .submissions.probe_press import probe_press

        build = lambda ratio: probe_press(sub, ratio, **limits)  # noqa: E731
    build_whole = None
    if getattr(sub, "whole_cache", False):  # B_offline runs it (its probes are for score/keep only)
        from .submissions.whole_cache import not_allowed, whole_cache_press

        build_whole = lambda ratio: whole_cache_press(sub, ratio, **limits)  # noqa: E731
        build = build if sub.returns != "none" else not_allowed(sub.name)
    return Contender(sub.name, build, "submission", own_prefill=bool(probes), decode=decode, probes=probes,
                     build_whole=build_whole)


def _sdpa_cpu_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


@contextmanager
def count_flops():
    """FlopCounterMode with CPU sdpa counted (torch registers only the CUDA kernels)."""
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_flops}
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        yield counter


CONTEXTS_PER_DECODE = 32  # contexts whose caches are decoded together (board A's dev items at cpu: all of them)
DECODE_BYTES = 2 << 30  # ... unless their caches reach this many bytes (a large model's: fewer contexts)


class BoardRunner:
    """Evaluates contenders on items of one board with one model."""

    def __init__(self, model: Any, tokenizer: Any, board: Board, batch_size: int | None = None) -> None:
        self.model, self.tokenizer, self.board = model, tokenizer, board
        self.pipe = make_pipeline(model, tokenizer)
        self.batch_size = batch_size
        cfg = model.config
        self.kv_per_token = cfg.num_hidden_layers * cfg.num_key_value_heads

    def run(self, items: pd.DataFrame, contenders: Iterable[Contender], progress: bool = True) -> pd.DataFrame:
        """One row per (contender, budget, item); the full cache is always run (budget 1.0, method ``no_press``).
        Each context is compressed as it comes (a submission in a fresh sandbox per context); the caches of up to
        ``CONTEXTS_PER_DECODE`` contexts (``DECODE_BYTES`` in all) are decoded together, so a decode loop's fixed
        cost per step and its longest answer are paid once for many contexts (the answers do not change)."""
        contenders = [c for c in contenders if c.name != NO_PRESS]
        pending: list[list[PendingRow]] = []  # per context, its rows (the full cache's first)

        def one(group: pd.DataFrame) -> list[dict]:
            pending.append(self._compress(group, contenders))
            full = sum(row.cache.nbytes() for context in pending for row in context) >= DECODE_BYTES
            return self._decode_pending(pending) if full or len(pending) >= CONTEXTS_PER_DECODE else []

        rows = over_contexts(items, one, self.board.name, progress)
        return pd.DataFrame(rows + self._decode_pending(pending), columns=ROW_COLUMNS)

    def _decode_pending(self, pending: list[list[PendingRow]]) -> list[dict]:
        """Decode the pending contexts' caches together; their rows in context order (the full cache first)."""
        flat = [row for context in pending for row in context]
        answers = decode_by_width(self.model, self.tokenizer, [r.cache for r in flat], self.batch_size) if flat else []
        out, at = [], 0
        for context in pending:
            full = context[0]  # the full cache's row comes first (``_compress``)
            full_stats = self._stats(full.cache, full.prefill.context_length)
            for r, answer in zip(context, answers[at:at + len(context)], strict=True):
                out.append(self._record(r.method, r.budget, r.item, r.overhead_flops, r.cache, answer, full_stats,
                                        r.prefill))
            at += len(context)
        pending.clear()
        return out

    # ---------------------------------------------------------------------------------- one context
    def tokenize(self, group: pd.DataFrame):
        """A context's ids and each question's: on a query-aware board the question is part of the context
        (the method sees it) and the question forward is empty; otherwise the context is prefilled alone."""
        first = group.iloc[0]
        text = first.context + first.question if self.board.query_aware else first.context
        questions = [""] * len(group) if self.board.query_aware else list(group.question)
        context_ids = self.pipe.preprocess(text, [""], first.answer_prefix, max_context_length=10**9)["context_ids"]
        question_ids = [self.pipe.preprocess(text, [q], p, max_context_length=10**9)["questions_ids"][0]
                        for q, p in zip(questions, group.answer_prefix, strict=True)]
        return context_ids, question_ids

    def _compress(self, group: pd.DataFrame, contenders: list[Contender]) -> list[PendingRow]:
        """One context: its shared prefill, every contender x budget's compressed cache; one ``PendingRow`` per
        (cache, question), the full cache's first."""
        first = group.iloc[0]
        context_ids, question_ids = self.tokenize(group)
        if not self.board.query_aware:
            from .submissions.probes import check_not_question

            for c in contenders:
                check_not_question(c.probes, group.question)  # before anything of this context runs
        with count_flops() as counter:
            shared = SharedPrefill(self.model, context_ids)
        prefill_flops = counter.get_total_flops()
        base = PrefillFacts(shared.context_length, prefill_flops)
        plan = [(NO_PRESS, 1.0, lambda: self._shared_cache(shared, None))]
        self._prefill_rate = prefill_flops / max(shared.seconds, 1e-9)  # FLOPs per second: charges sandbox seconds
        for c in contenders:
            build = c.press_for(self.board)
            own = c.own_prefill and build is c.build  # the whole-cache hook always takes the shared prefill
            for keep in self.board.budgets:
                ratio = round(1.0 - keep, 6)
                make = (lambda b=build, r=ratio: self._own_cache(b(r), context_ids, prefill_flops)) \
                    if own else (lambda b=build, r=ratio: self._shared_cache(shared, b(r)))
                plan.append((c.name, keep, make))
        rows = []
        for name, keep, make in plan:
            cache, flops = make()
            template = CacheRow.from_cache(self.model, cache, question_ids[0], shared.context_length,
                                           int(first.max_new_tokens))
            for j, item in enumerate(group.itertuples(index=False)):
                row = template if j == 0 else CacheRow(template.keys, template.values, template.masked,
                                                       question_ids[j].reshape(1, -1), template.start,
                                                       int(item.max_new_tokens))
                rows.append(PendingRow(name, keep, item, flops, base, row))
        return rows

    def _shared_cache(self, shared: SharedPrefill, press: BasePress | None) -> tuple[Any, int]:
        with count_flops() as counter:
            cache = shared.cache_for(press)
        charged = getattr(press, "charged_seconds", 0.0)  # a whole-cache hook's seconds in its sandbox
        return cache, counter.get_total_flops() + int(round(charged * getattr(self, "_prefill_rate", 0.0)))

    def _own_cache(self, press: BasePress | None, context_ids: torch.Tensor, prefill_flops: int) -> tuple[Any, int]:
        """A press that replays the context (KVzip) prefills under its own hook; its overhead is what it costs
        beyond a plain prefill."""
        from transformers import DynamicCache

        cache = DynamicCache()
        with count_flops() as counter, torch.no_grad():
            if press is None:
                self.model.model(input_ids=context_ids.to(self.model.device), past_key_values=cache)
            else:
                with press(self.model):
                    self.model.model(input_ids=context_ids.to(self.model.device), past_key_values=cache)
        return cache, max(0, counter.get_total_flops() - prefill_flops)

    def _stats(self, row: CacheRow, context_length: int) -> CacheStats:
        physical = sum(k.shape[1] * k.shape[2] for k in row.keys)
        masked = sum(int(m.sum()) for m in row.masked if m is not None)
        question = row.question_ids.shape[1] * self.kv_per_token
        return CacheStats(logical_entries=physical - masked, physical_entries=physical, kv_bytes=row.nbytes(),
                          read_entries=physical + question, question_entries=question)

    def _record(self, name: str, keep: float, item: Any, flops: int, row: CacheRow, answer: str,
                full_stats: CacheStats, base: PrefillFacts) -> dict:
        """One row of ``ROW_COLUMNS``: the answer's score beside the cache's measures and the full cache's."""
        stats = self._stats(row, base.context_length)
        score = metric_for(item.task)([clean_prediction(answer)], [as_refs(item.answer)])
        return {"method": name, "budget": keep, "item": item.item, "context_id": item.context_id, "task": item.task,
                "length": item.length, "score": float(score), "predicted_answer": answer,
                "logical_entries": stats.logical_entries, "physical_entries": stats.physical_entries,
                "full_entries": full_stats.physical_entries, "kv_bytes": stats.kv_bytes,
                "full_kv_bytes": full_stats.kv_bytes, "read_entries": stats.read_entries,
                "full_read_entries": full_stats.physical_entries + stats.question_entries,
                "overhead_flops": int(flops), "prefill_flops": int(base.prefill_flops)}
