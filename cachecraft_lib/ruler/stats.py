"""Summaries of a RULER table for notebooks: token use per task, oracle and empty-answer checks."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .scoring import score
from .tasks import SUBSTITUTES
from .templates import task_family
from .tokens import as_counter


def token_use(df: pd.DataFrame, tokenizer: Any, length: int) -> pd.DataFrame:
    """Per-row prompt tokens (context + question + answer prefix) and share of the budget used."""
    count = as_counter(tokenizer)
    prompt = [count(c + q + a) for c, q, a in zip(df.context, df.question, df.answer_prefix, strict=True)]
    out = pd.DataFrame({"task": df.task.values, "prompt_tokens": prompt, "max_new_tokens": df.max_new_tokens.values})
    out["budget_used"] = (out.prompt_tokens + out.max_new_tokens) / length
    return out


def task_table(df: pd.DataFrame, tokenizer: Any, length: int) -> pd.DataFrame:
    """One row per task: samples, mean prompt tokens, budget use, metric and what (if anything) was substituted."""
    use = token_use(df, tokenizer, length)
    table = use.groupby("task", sort=False).agg(
        samples=("prompt_tokens", "size"), prompt_tokens=("prompt_tokens", "mean"),
        min_budget_used=("budget_used", "min"), max_new_tokens=("max_new_tokens", "first"))
    table["metric"] = ["string_match_part" if task_family(t) == "qa" else "string_match_all" for t in table.index]
    source = df.attrs.get("source", "offline")
    table["data"] = [("hf" if source == "hf" else SUBSTITUTES.get(t, "RULER generator")) for t in table.index]
    return table


def oracle_scores(df: pd.DataFrame) -> dict[str, float]:
    """Scores of perfect answers (the references themselves): 100 everywhere if the data is consistent."""
    oracle = df.assign(predicted_answer=[" ".join(a) for a in df.answer])
    return score(oracle)
