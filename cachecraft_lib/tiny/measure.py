"""Measure the embedded model through KVPress's pipeline: RULER scores per length and press, and how it misses.

The quality numbers come from freshly generated offline RULER at the ``cpu`` profile's lengths with
seeds the training never used (training draws ``Random(recipe.seed * 1_000_003 + step)``), scored
with RULER's metrics. Compression checks: StreamingLLM at r = 0.88 must fall far below no
compression, SnapKV at r = 0.25 must stay close to it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd

from ..ruler import generate, score
from ..ruler.scoring import as_refs, clean_prediction, metric_for
from ..util.progress import tqdm

EVAL_SEED = 987_654  # never a training seed
HELDOUT_SEED = 424_242  # a second unseen seed with more samples: picks between checkpoints, tells noise from progress
SMOKE_CHECK = {"length": 1024, "samples_per_task": 2, "tasks": ("niah_single_1", "niah_multikey_2", "vt")}


def predict(model: Any, tokenizer: Any, df: pd.DataFrame, press: Any = None, progress: bool = True,
            pipeline: type | None = None) -> list[str]:
    """Greedy answers through KVPress's ``KVPressTextGenerationPipeline`` (no chat template: bos + context),
    or through a subclass of it (``pipeline``)."""
    from kvpress import KVPressTextGenerationPipeline

    pipe = (pipeline or KVPressTextGenerationPipeline)(model=model, tokenizer=tokenizer, device=model.device)
    out = []
    for row in tqdm(list(df.itertuples()), desc="predict", disable=not progress, leave=False):
        result = pipe(row.context, question=row.question, answer_prefix=row.answer_prefix, press=press,
                      max_new_tokens=int(row.max_new_tokens))
        out.append(result["answer"])
    return out


def measure(model: Any, tokenizer: Any, lengths: tuple[int, ...], samples_per_task: int,
            tasks: tuple[str, ...] | None = None, seed: int = EVAL_SEED, progress: bool = True) -> dict:
    """Per-task RULER scores at each length: no compression, StreamingLLM 0.88, SnapKV 0.25."""
    from ..methods.registry import make_press

    settings = (("no_press", 0.0), ("streaming_llm", 0.88), ("snapkv", 0.25))
    results: dict[str, Any] = {"seed": seed, "samples_per_task": samples_per_task, "scores": {}, "failures": {}}
    for length in lengths:
        df = generate(length, tokenizer, samples_per_task=samples_per_task, seed=seed, tasks=tasks)
        for name, ratio in settings:
            answered = df.assign(predicted_answer=predict(model, tokenizer, df, make_press(name, ratio), progress=progress))
            results["scores"][f"{length}/{name}/{ratio}"] = score(answered)
            if name == "no_press":
                results["failures"][str(length)] = failures(answered)
    return results


def heldout_scores(model: Any, tokenizer: Any, lengths: tuple[int, ...], samples_per_task: int,
                   tasks: tuple[str, ...] | None = None, progress: bool = True) -> dict:
    """Uncompressed RULER scores per length on ``HELDOUT_SEED``: the check that chose the shipped
    checkpoint, with more samples per task than the card's main table (5 samples make one miss 20 points)."""
    scores = {}
    for length in lengths:
        df = generate(length, tokenizer, samples_per_task=samples_per_task, seed=HELDOUT_SEED, tasks=tasks)
        scores[str(length)] = score(df.assign(predicted_answer=predict(model, tokenizer, df, None, progress=progress)))
    return {"seed": HELDOUT_SEED, "samples_per_task": samples_per_task, "scores": scores}


def repeated_item(prediction: str) -> str | None:
    """An item a list answer writes twice (words or numbers of three characters or more, so list
    numbering does not count): the tiny model's typical miss on multivalue/multiquery/vt/cwe/fwe,
    where it finds one item and then cannot tell which ones it has already written."""
    items = re.findall(r"[A-Za-z0-9][\w'-]{2,}", prediction)
    item, count = Counter(items).most_common(1)[0] if items else ("", 0)
    return item if count >= 2 else None


def failures(df: pd.DataFrame) -> dict[str, dict]:
    """Per task: how many answers missed a reference, how many of those write one item twice, and the
    first miss (expected vs predicted), so the card says *how* the model fails, not only how often."""
    out: dict[str, dict] = {}
    for task, rows in df.groupby("task", sort=False):
        missed = []
        for row in rows.itertuples():
            refs, pred = as_refs(row.answer), clean_prediction(row.predicted_answer or "")
            if metric_for(str(task))([pred], [refs]) < 100:
                missed.append((refs, pred))
        if missed:
            refs, pred = missed[0]
            out[str(task)] = {"missed": len(missed), "of": len(rows),
                              "repeating": sum(repeated_item(p) is not None for _, p in missed),
                              "example": {"expected": refs, "predicted": pred[:120]}}
    return out


def smoke_scores(model: Any, tokenizer: Any) -> dict[str, float]:
    """A small, deterministic no-compression measurement stored in the card and re-checked by a test."""
    df = generate(SMOKE_CHECK["length"], tokenizer, samples_per_task=SMOKE_CHECK["samples_per_task"],
                  seed=EVAL_SEED, tasks=SMOKE_CHECK["tasks"])
    return score(df.assign(predicted_answer=predict(model, tokenizer, df, None, progress=False)))
