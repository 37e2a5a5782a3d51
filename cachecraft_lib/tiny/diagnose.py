"""Why the embedded model misses list answers: does it know the set, or only fail to stop repeating?

The tiny model answers vt, cwe and fwe by finding one item and writing it again ("kbvcpx kbvcpx kbvcpx").
``no_repeat_recall`` decodes the same prompts twice, greedily as KVPress's pipeline does and with every
token that started an earlier word of the answer banned from starting another, and scores both with
RULER's metric. A diagnostic, never a score: where banning lifts recall, words not yet written come next
in the model's ranking (teacher-forced it still seldom ranks the right cwe or fwe item first, README);
where it does not (vt), the items themselves are not found.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..models.pipeline import NoRepeatPipeline
from ..ruler import generate, score
from .measure import EVAL_SEED, predict

LIST_TASKS = ("vt", "cwe", "fwe")  # answers of several words; NIAH's digit values are single-token pieces


def no_repeat_recall(model: Any, tokenizer: Any, lengths: tuple[int, ...], samples_per_task: int,
                     tasks: tuple[str, ...] = LIST_TASKS, seed: int = EVAL_SEED) -> pd.DataFrame:
    """Per (length, task): RULER's score of the pipeline's greedy answers and of answers through
    ``NoRepeatPipeline`` (no compression), on the same samples."""
    rows = []
    for length in lengths:
        df = generate(length, tokenizer, samples_per_task=samples_per_task, seed=seed, tasks=tasks)
        greedy, no_repeats = (score(df.assign(predicted_answer=predict(model, tokenizer, df, progress=False,
                                                                       pipeline=pipeline)))
                              for pipeline in (None, NoRepeatPipeline))
        for task, group in df.groupby("task", sort=False):
            rows.append({"length": length, "task": task, "samples": len(group),
                         "greedy": greedy[task], "no_repeats": no_repeats[task]})
    return pd.DataFrame(rows)
