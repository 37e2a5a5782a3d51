"""The grid runner: for each sample, one shared prefill, every cell's compressed cache, one batched decode.

How a cell is computed: prefill the context under the method's press, answer greedily with the row's
``max_new_tokens``, score with RULER's metrics, exactly as KVPress's pipeline would. What is shared:

- single-pass presses compress inside a hook after each layer's full prefill, so one ``SharedPrefill`` per
  sample serves every method and ratio (``cache_for(press)`` replays only the compression);
- presses that change the prefill itself (Finch reads the question after a delimiter inside the context;
  any multi-pass press) prefill on their own, under their own hook (``own_prefill_row``);
- then the cells' caches of several samples are decoded together (``batches``: as many samples as the free
  memory holds on CUDA; ``decode.decode_by_width``), ``batch_size`` rows at a time. ``decode="serial"``
  decodes cell by cell through KVPress's pipeline instead (the path for flash attention, which takes no 4D
  mask, and the reference the batched path is checked against).

Results go through ``CellStore``: after each decode every cell's answers are appended to its
``partial.jsonl``, so an interruption loses at most the samples in flight, and a re-run skips what is done.
A press that raises fails its own cell only (``failed.json``, the reason in the summary); ``run_group`` is the
unit of work ``ray_runner`` places on a cluster.
"""

from __future__ import annotations

import logging
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..methods.registry import REGISTRY, make_press
from ..models.loading import load_model
from ..models.pipeline import Answerer, tokenwise_question
from ..models.prefill import SharedPrefill
from ..ruler import load
from ..util.progress import tqdm
from ..util.timers import clock
from .batches import Waiting, decode_plan
from .cells import Cell
from .decode import CacheRow, decode_by_width, decode_rows
from .own_prefill import own_prefill_row
from .store import CellStore, dataset_fingerprint, fingerprint, load_failures, load_results

log = logging.getLogger(__name__)
DECODE_MODES = ("batched", "serial")


@dataclass
class _Job:
    cell: Cell
    fp: str
    done: dict[int, dict]
    store: CellStore
    failure: str | None = None  # why its press raised; the cell then stops, the group goes on

    @property
    def own_prefill(self) -> bool:
        return REGISTRY[self.cell.method].needs_query_aware


def run_grid(cells: list[Cell], out_dir: str | Path, progress: bool = True, device: str | None = None,
             dtype: str = "auto", batch_size: int | None = None, decode: str = "batched",
             samples_per_decode: int | None = None) -> pd.DataFrame:
    """Compute every unfinished cell, write its result files; returns the summary (``load_results``).

    ``batch_size`` caps the rows decoded together (default: all of them on CPU, what the free memory holds on
    CUDA); ``samples_per_decode`` how many samples' rows wait for one decode (default: ``batches.decode_plan``:
    by free memory on CUDA); ``decode="serial"`` decodes one cell at a time. A cell whose press
    raises is recorded (``failed.json``), left out of the summary and listed in ``summary.attrs["failed"]``;
    the other cells of its group finish as if it had not been asked for.
    """
    check_options(decode, batch_size)
    store = CellStore(out_dir)
    loaded: dict[str, tuple] = {}
    outer = tqdm(total=len(cells), desc="grid cells", disable=not progress)
    try:
        for members in group_cells(cells).values():
            model_name = members[0].model
            if model_name not in loaded:
                loaded.clear()
                loaded[model_name] = load_model(model_name, device=device, dtype=dtype)
            run_group(members, store, *loaded[model_name], decode=decode, batch_size=batch_size,
                      progress=progress, on_cell=lambda _cell: outer.update(1), samples_per_decode=samples_per_decode)
    except KeyboardInterrupt:
        outer.close()
        print("interrupted: finished cells are saved and partial answers kept; run the same command to resume")
        raise
    outer.close()
    return summarize(out_dir, cells)


def check_options(decode: str, batch_size: int | None) -> None:
    if decode not in DECODE_MODES:
        raise ValueError(f"decode must be one of {DECODE_MODES}, got {decode!r}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


def group_cells(cells: list[Cell]) -> dict[tuple, list[Cell]]:
    """Cells by (model, length, dataset): the unit of work that shares one model load and one prefill per sample."""
    groups: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[cell.group].append(cell)
    return dict(groups)


def summarize(out_dir: str | Path, cells: list[Cell], errors: dict[str, str] | None = None) -> pd.DataFrame:
    """``load_results`` of ``cells``, with ``attrs["failed"]``: {cell key: reason} of each unfinished cell whose
    press raised (``failed.json``) or whose whole group failed (``errors``)."""
    summary = load_results(out_dir, cells)
    finished = set(summary.cell) if len(summary) else set()
    failed = {k: v for k, v in (errors or {}).items() if k not in finished}
    failed.update(load_failures(out_dir, [c for c in cells if c.key not in finished]))
    summary.attrs["failed"] = failed
    return summary


def run_group(members: list[Cell], store: CellStore, model: Any, tokenizer: Any, decode: str = "batched",
              batch_size: int | None = None, progress: bool = False,
              on_cell: Callable[[Cell], None] | None = None, samples_per_decode: int | None = None) -> dict[str, str]:
    """Compute the unfinished cells of one group (``group_cells``) with a loaded model; ``on_cell`` is called
    once per cell that is settled (skipped, finished or failed). Returns {cell key: reason} of the failed ones."""
    on_cell = on_cell or (lambda _cell: None)
    _, length, query_aware, samples, seed, source, tasks, max_new = members[0].group
    df = load(length, tokenizer, source=source, samples_per_task=samples, seed=seed, tasks=tasks)
    if max_new is not None:
        df = df.assign(max_new_tokens=max_new)
    dataset = {"source": df.attrs.get("source"), "substitutes": df.attrs.get("substitutes", {}),
               "fingerprint": dataset_fingerprint(df), "rows": len(df)}
    jobs = _pending(members, store, dataset["fingerprint"], on_cell)
    failed: dict[str, str] = {}
    if jobs:
        mode = decode if _supports_masks(model) else "serial"
        runner = _GroupRunner(model, tokenizer, query_aware, mode, batch_size, samples_per_decode)
        runner.run(jobs, df, length, progress)
        for job in jobs:
            if job.failure is not None:
                failed[job.cell.key] = job.failure
            else:
                store.finish(job.cell, job.fp, df, job.done, dataset, runner.timings(job))
            on_cell(job.cell)
    return failed


def _pending(members: list[Cell], store: CellStore, dataset_fp: str,
             on_cell: Callable[[Cell], None]) -> list[_Job]:
    """The cells of a group that are not done, each with the answers it already has."""
    jobs = []
    for cell in members:
        fp = fingerprint(cell, dataset_fp)
        state = store.status(cell, fp)
        if state == "done":
            on_cell(cell)
            continue
        if state in ("corrupt", "stale"):
            log.warning("cell %s: result file is %s; recomputing", cell.key, state)
        jobs.append(_Job(cell, fp, store.partial(cell, fp), store))
    return jobs


def _supports_masks(model: Any) -> bool:
    attn = model.config._attn_implementation
    if attn in ("sdpa", "eager"):
        return True
    log.warning("attention %r takes no 4D mask: decoding cell by cell instead of batched", attn)
    return False


class _GroupRunner:
    """Answers every pending (cell, sample) of one (model, length) group and keeps per-cell timings."""

    def __init__(self, model: Any, tokenizer: Any, query_aware: bool, mode: str, batch_size: int | None,
                 samples_per_decode: int | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.answerer = Answerer(model, tokenizer)
        self.query_aware, self.mode, self.batch_size = query_aware, mode, batch_size
        self.samples_per_decode = samples_per_decode  # None: batches.decode_plan decides (memory on CUDA)
        self.prefill_s: dict[str, float] = defaultdict(float)

    def run(self, jobs: list[_Job], df: pd.DataFrame, length: int, progress: bool) -> None:
        """Every pending (cell, sample): serially sample by sample, or batched with the rows of several samples
        waiting for one decode (``batches.decode_plan``)."""
        todo = [i for i in range(len(df)) if any(i not in job.done for job in jobs)]
        plan, waiting = decode_plan(self.model.device, self.samples_per_decode), Waiting()
        for i in tqdm(todo, desc=f"{length} tokens: samples", disable=not progress, leave=False):
            pending = [job for job in jobs if i not in job.done and job.failure is None]
            if not pending:
                continue
            if self.mode == "serial":
                shared, question_ids = self._shared(pending, df.iloc[i])
                for job in pending:
                    answer = self._guarded(job, i, self._serial, job, df.iloc[i], shared, question_ids)
                    if answer is not None:
                        self._keep(job, i, *answer)
                continue
            self.compress(pending, df.iloc[i], i, waiting)
            if plan.full(waiting):
                self.flush(waiting)
        self.flush(waiting)

    def _keep(self, job: _Job, index: int, answer: str, seconds: float) -> None:
        record = {"index": index, "predicted_answer": answer, "seconds": round(seconds, 4)}
        job.store.append(job.cell, job.fp, record)
        job.done[index] = record

    def compress(self, jobs: list[_Job], row: Any, index: int, waiting: Waiting) -> None:
        """Every job's compressed cache of one RULER row into ``waiting``; CUDA-synchronised readings, so each
        row's compression is charged to its own cell. A job whose press raises is failed and adds nothing."""
        shared, question_ids = self._shared(jobs, row)
        for job in jobs:
            start = clock(self.model.device)
            cache_row = self._guarded(job, index, self._row, job, row, shared, question_ids)
            if cache_row is not None:
                waiting.add(job, index, cache_row, clock(self.model.device) - start)

    def flush(self, waiting: Waiting) -> None:
        """Decode every waiting row together and keep each answer, with its compression seconds and an equal
        share of the decode."""
        if not waiting.rows:
            return
        start = clock(self.model.device)
        answers = self._decode(waiting)
        share = (clock(self.model.device) - start) / len(waiting.rows)
        for job, index, answer, seconds in zip(waiting.jobs, waiting.indices, answers, waiting.seconds, strict=True):
            if answer is not None:
                self._keep(job, index, answer, seconds + share)
        waiting.clear()

    def _row(self, job: _Job, row: Any, shared: SharedPrefill | None, question_ids: torch.Tensor | None) -> CacheRow:
        """The job's compressed cache, ready for the batched decoder."""
        if job.own_prefill:
            cache_row = own_prefill_row(self.answerer, job.cell, row.context, row.question, row.answer_prefix,
                                        int(row.max_new_tokens))
        else:
            cache = shared.cache_for(make_press(job.cell.method, job.cell.ratio))
            cache_row = CacheRow.from_cache(self.model, cache, question_ids, shared.context_length,
                                            int(row.max_new_tokens))
        cache_row.tokenwise = self.question_feed(job.cell) == "tokenwise"
        return cache_row

    def question_feed(self, cell: Cell) -> str:
        """How ``cell``'s question is fed, the same for every sample: the method's feed
        (``pipeline.tokenwise_question``), except in the batched engine in float32, which feeds every row in one
        forward (there both feeds give the same answers, and one forward is faster)."""
        if self.mode == "batched" and self.model.dtype == torch.float32:
            return "batched"
        return "tokenwise" if tokenwise_question(cell.method) else "batched"

    def _decode(self, waiting: Waiting) -> list[str | None]:
        """One decode of every waiting row (one sample's: ``decode_rows``; several: ``decode_by_width``); if it
        raises, each row alone, so that only the row that fails is lost."""
        try:
            if waiting.samples == 1:
                return decode_rows(self.model, self.tokenizer, waiting.rows, self.batch_size)
            return decode_by_width(self.model, self.tokenizer, waiting.rows, self.batch_size)
        except Exception:  # which row failed is found below
            log.warning("batched decode of samples %s raised; decoding their rows one by one",
                        sorted(set(waiting.indices)))
            return [self._guarded(job, i, lambda r=r: decode_rows(self.model, self.tokenizer, [r])[0])
                    for job, i, r in zip(waiting.jobs, waiting.indices, waiting.rows, strict=True)]

    def _guarded(self, job: _Job, index: int, fn: Callable, *args: Any) -> Any:
        """``fn(*args)``, or None with the job marked failed (reason in ``failed.json``) when it raises."""
        try:
            return fn(*args)
        except Exception as err:  # a cell's own failure must not stop its group
            SharedPrefill.clear_masks(self.model)  # a head-wise press may have left masks half set
            job.failure = f"{type(err).__name__}: {err}"
            job.store.fail(job.cell, job.fp, job.failure, index, traceback.format_exc())
            log.warning("cell %s failed on sample %d: %s; the rest of the grid goes on", job.cell.key, index,
                        job.failure)
            return None

    def _shared(self, jobs: list[_Job], row: Any) -> tuple[SharedPrefill | None, torch.Tensor | None]:
        """The sample's shared prefill (if any job uses it) and its question ids; prefill time split per user."""
        users = [job for job in jobs if not job.own_prefill]
        if not users:
            return None, None
        context, question = (row.context + row.question, "") if self.query_aware else (row.context, row.question)
        ids = self.answerer.pipe(False).preprocess(context, [question], row.answer_prefix, max_context_length=10**9)
        shared = SharedPrefill(self.model, ids["context_ids"])
        for job in users:
            self.prefill_s[job.cell.key] += shared.seconds / len(users)
        return shared, ids["questions_ids"][0].to(self.model.device)

    def _serial(self, job: _Job, row: Any, shared: SharedPrefill | None,
                question_ids: torch.Tensor | None) -> tuple[str, float]:
        start = clock(self.model.device)
        if job.own_prefill:
            answer = self.answerer.answer(job.cell.method, job.cell.ratio, row.context, row.question,
                                          row.answer_prefix, row.max_new_tokens)
        else:
            answer = answer_one(self.answerer, shared, job.cell, question_ids, row.max_new_tokens)
        return answer, clock(self.model.device) - start

    def timings(self, job: _Job) -> dict[str, float]:
        decode = sum(r["seconds"] for r in job.done.values())
        prefill = self.prefill_s[job.cell.key]
        return {"decode_s": round(decode, 3), "shared_prefill_s": round(prefill, 3),
                "total_s": round(decode + prefill, 3), "decode_mode": self.mode,
                "question_feed": self.question_feed(job.cell)}


def answer_one(answerer: Answerer, shared: SharedPrefill, cell: Cell, question_ids: torch.Tensor,
               max_new_tokens: int) -> str:
    """One cell's answer from the shared prefill through KVPress's pipeline, with the method's question feed
    (``pipeline.tokenwise_question``: the same for every sample)."""
    press = make_press(cell.method, cell.ratio)
    cache = shared.cache_for(press)
    pipe = answerer.pipe(tokenwise_question(cell.method))  # the method's feed, whatever this sample's cache
    try:
        with torch.no_grad():
            return pipe.generate_answer(question_ids, cache, shared.context_length, int(max_new_tokens))
    finally:
        SharedPrefill.clear_masks(answerer.model)
