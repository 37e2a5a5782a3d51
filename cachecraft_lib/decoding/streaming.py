"""The streaming board: the context arrives as decode chunks under a per-layer cap, then the questions.

This is *streaming eviction, not reasoning*: the embedded model cannot do math, and RULER answers (about
ten tokens) end before any eviction would happen during answering. Instead the whole context is fed in
``chunk``-token forwards through ``CappedGenerator`` under ``cap = cap_fraction x context tokens``, so the
method decides, while the context streams in, what stays; then each question is answered greedily from
the same streamed state (the cap still holds while the question and answer are fed). The full cache is
the same stream without a cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
from kvpress import KVPressTextGenerationPipeline

from ..grid.decode import stop_ids
from ..methods.registry import NO_PRESS
from ..ruler.scoring import as_refs, clean_prediction, metric_for
from ..stats.intervals import METHOD_NOTE, fmt, judge, paired_bootstrap
from ..util.progress import tqdm
from .capped import CappedGenerator, cap_method

__all__ = ["BOARD_LABEL", "StreamResult", "board_table", "measure", "stream_answers"]

BOARD_LABEL = "streaming eviction, not reasoning"


@dataclass(frozen=True)
class StreamResult:
    """Answers of one streamed context, and the largest cache each layer's attention ran over."""

    answers: list[str]
    max_cache: list[int]
    context_tokens: int
    cap: int | None


def stream_answers(model, tokenizer, context: str, questions: Sequence[str], answer_prefix: str,
                   method: str, cap_fraction: float | None, max_new_tokens: int, chunk: int = 128) -> StreamResult:
    """Stream ``context`` under ``cap_fraction`` of its tokens (None: full cache), then answer every question.

    Context and questions are tokenized as KVPress's pipeline does (chat template or BOS), so the streamed
    tokens are the ones the grid prefills.
    """
    if cap_fraction is not None and not 0 < cap_fraction < 1:
        raise ValueError(f"cap_fraction must be in (0, 1) or None for the full cache, got {cap_fraction}")
    ids = KVPressTextGenerationPipeline.preprocess(SimpleNamespace(tokenizer=tokenizer), context, list(questions),
                                                   answer_prefix, max_context_length=10**9)
    device = next(model.parameters()).device
    context_ids = ids["context_ids"].to(device)
    n = context_ids.shape[1]
    cap = None if cap_fraction is None or method == NO_PRESS else int(round(cap_fraction * n))
    gen = CappedGenerator(model, cap_method(NO_PRESS if cap is None else method), cap=cap, chunk=chunk)
    gen.feed(context_ids)
    state = gen.snapshot()
    stop, answers = stop_ids(model), []
    for question_ids in ids["questions_ids"]:
        gen.restore(state)
        out = gen.generate(question_ids.to(device), max_new_tokens, stop)
        answers.append(str(tokenizer.decode(out, skip_special_tokens=True)))
    return StreamResult(answers, gen.max_cache_lengths(), n, cap)


def measure(model, tokenizer, rows: pd.DataFrame, methods: Iterable[str], cap_fractions: Iterable[float],
            model_name: str = "tiny", chunk: int = 128, progress: bool = True) -> pd.DataFrame:
    """One row per (sample, method, cap): the board's per-sample table, ready for ``paired_bootstrap``.

    Columns: model, length, task, index, method, cap_fraction, cell, prediction, score (RULER's metric, 0-100),
    max_cache (largest per-layer cache seen), cap, within_cap. The full cache runs once per sample and is
    the cell ``no_press``.
    """
    cells = [(NO_PRESS, None)] + [(m, c) for c in cap_fractions for m in methods if m != NO_PRESS]
    out = []
    rows = rows.assign(index=rows.groupby("task").cumcount())
    with torch.no_grad():
        for row in tqdm(list(rows.itertuples()), desc="streaming board", disable=not progress):
            for method, frac in cells:
                res = stream_answers(model, tokenizer, row.context, [row.question], row.answer_prefix, method, frac,
                                     int(row.max_new_tokens), chunk)
                pred = res.answers[0]
                score = metric_for(row.task)([clean_prediction(pred)], [as_refs(row.answer)])
                out.append({"model": model_name, "length": int(row.length) if hasattr(row, "length") else None,
                            "task": row.task, "index": int(row.index), "method": method, "cap_fraction": frac,
                            "cell": method if frac is None else f"{method}@{frac:g}", "prediction": pred,
                            "score": float(score), "max_cache": max(res.max_cache), "cap": res.cap,
                            "within_cap": res.cap is None or max(res.max_cache) <= res.cap})
    df = pd.DataFrame(out)
    df.attrs["label"] = BOARD_LABEL
    return df


def board_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (cap, method): RULER score, its share of the full cache's score and the difference to full, each with
    the 95% paired bootstrap interval; ``below the full cache?`` is the three-valued verdict on "scores below the full cache"."""
    boot = paired_bootstrap(samples.fillna({"length": 0}), unit="cell")
    full = boot.units.index(NO_PRESS)
    rows = []
    for cell in boot.units:
        share = boot.draws[:, boot.units.index(cell)] / np.where(boot.draws[:, full] > 0, boot.draws[:, full], np.nan)
        point = boot.point[boot.units.index(cell)] / boot.point[full] if boot.point[full] > 0 else np.nan
        diff = boot.diff(cell, NO_PRESS)
        if diff.n >= 2 and np.isfinite(share).any():
            lo, hi = np.nanpercentile(share, [2.5, 97.5])
            share_text = f"{point:.2f} [{lo:.2f}, {hi:.2f}]"
        else:
            share_text = f"{point:.2f} [no interval at n = {diff.n}]"
        method, _, cap = cell.partition("@")
        rows.append({"cap": cap or "none", "method": method, "score": fmt(boot.mean(cell)),
                     "share of full": share_text, "minus full": fmt(diff),
                     "below the full cache?": str(judge(diff, high=0.0)) if cell != NO_PRESS else "",
                     "n per task": int(boot.mean(cell).n)})
    table = pd.DataFrame(rows).sort_values(["cap", "method"]).reset_index(drop=True)
    table.attrs.update(label=BOARD_LABEL, note=METHOD_NOTE)
    return table
