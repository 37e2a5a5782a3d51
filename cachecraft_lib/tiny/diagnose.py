"""Why the embedded model misses list answers: does it know the set, or only fail to stop repeating?

The tiny model answers vt, cwe and fwe by finding one item and writing it again ("kbvcpx kbvcpx kbvcpx").
``no_repeat_recall`` decodes the same prompts twice, greedily as KVPress's pipeline does and with every
token that started an earlier word of the answer banned from starting another, and scores both with
RULER's metric. A diagnostic, never a score: where banning lifts recall, the model ranks the other items
high but has no way to tell which it has already written; where it does not (vt), the items themselves
are not found.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from ..ruler import generate
from ..ruler.scoring import as_refs, clean_prediction, metric_for
from .card import EVAL_SEED
from .render import render_ids

LIST_TASKS = ("vt", "cwe", "fwe")  # answers of several words; NIAH's digit values are single-token pieces


def _starts_word(piece: str, first: bool) -> bool:
    """A token that begins a word of letters: after a space, or the answer's very first token."""
    return (piece.startswith(" ") or first) and piece.strip()[:1].isalpha()


@torch.no_grad()
def greedy_answer(model: Any, tokenizer: Any, context: str, question: str, answer_prefix: str,
                  max_new_tokens: int, ban_repeats: bool = False) -> str:
    """Greedy answer to ``question`` about ``context`` (rendered as KVPress renders it, no compression);
    with ``ban_repeats``, a token that started a word of the answer may not start another one."""
    ctx, q, _ = render_ids(tokenizer, context, question, answer_prefix)
    out = model(input_ids=torch.tensor([ctx + q], device=model.device), use_cache=True)
    past, logits = out.past_key_values, out.logits[0, -1]
    written: list[int] = []
    banned: set[int] = set()
    for _ in range(max_new_tokens):
        if ban_repeats and banned:
            logits = logits.clone()
            logits[list(banned)] = float("-inf")
        token = int(logits.argmax())
        if token == tokenizer.eos_token_id:
            break
        if _starts_word(tokenizer.decode([token]), first=not written):
            banned.add(token)
        written.append(token)
        out = model(input_ids=torch.tensor([[token]], device=model.device), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tokenizer.decode(written, skip_special_tokens=True)


def no_repeat_recall(model: Any, tokenizer: Any, lengths: tuple[int, ...], samples_per_task: int,
                     tasks: tuple[str, ...] = LIST_TASKS, seed: int = EVAL_SEED) -> pd.DataFrame:
    """Per (length, task): RULER's score of greedy answers and of answers that may not repeat a word."""
    rows = []
    for length in lengths:
        df = generate(length, tokenizer, samples_per_task=samples_per_task, seed=seed, tasks=tasks)
        for task, group in df.groupby("task", sort=False):
            metric = metric_for(str(task))
            scores: dict[bool, list[float]] = {False: [], True: []}
            for row in group.itertuples():
                for ban in (False, True):
                    answer = greedy_answer(model, tokenizer, row.context, row.question, row.answer_prefix,
                                           int(row.max_new_tokens), ban_repeats=ban)
                    scores[ban].append(metric([clean_prediction(answer)], [as_refs(row.answer)]))
            rows.append({"length": length, "task": task, "samples": len(group),
                         "greedy": sum(scores[False]) / len(group), "no_repeats": sum(scores[True]) / len(group)})
    return pd.DataFrame(rows)
