"""MATH-500 items for board C on the paper profile: a reasoning model decodes under the cap.

The post's board C: 80 MATH-500 problems, pass@1 (greedy), up to 16,384 new tokens, caps of 2,048 / 4,096 KV
entries per layer, generated length as an efficiency term. Problems come from the hub (``DATASETS``, the
first that loads); without the hub the board is *not measurable here* (``NotMeasurable``, raised before any
model is loaded), never a crash or a substitute. Answers are graded by ``math_answers.grade``.

Splits: the 500 problems are shuffled by the board's public dev seed; the dev items are the first
``items['dev']``, and the test items are drawn from the rest by the seed derived from the secret
(``items.split_seed``), so dev and test never share a problem.
"""

from __future__ import annotations

import random

import pandas as pd

from .boards import Board
from .items import COLUMNS, split_seed

DATASETS = ("HuggingFaceH4/MATH-500", "alessiodevoto/math500")
PROMPT = "{problem}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
TASK = "math500"


class NotMeasurable(RuntimeError):
    """The board cannot be measured on this machine (no hub); the message says what it needs."""


def load_problems() -> pd.DataFrame:
    """MATH-500's 500 problems (``problem``, ``answer``, ``unique_id``) from the hub, or ``NotMeasurable``."""
    from ...ruler.dataset import hub_reachable

    if not hub_reachable():
        raise NotMeasurable(f"not measurable here: board C on the paper profile needs MATH-500 ({DATASETS[0]}) and "
                            "a reasoning model (Qwen/Qwen3-8B) from the Hugging Face hub, which is unreachable; run it "
                            "on a GPU machine with hub access (the embedded profiles' board C runs offline)")
    from datasets import load_dataset

    errors = []
    for name in DATASETS:
        try:
            df = load_dataset(name, split="test").to_pandas()
        except Exception as err:  # noqa: BLE001 - try the next copy, report all
            errors.append(f"{name}: {type(err).__name__}: {err}")
            continue
        if "unique_id" not in df:
            df["unique_id"] = [f"{name}/{i}" for i in range(len(df))]
        return df[["problem", "answer", "unique_id"]].reset_index(drop=True)
    raise NotMeasurable("not measurable here: no copy of MATH-500 loads (" + "; ".join(errors) + ")")


def select_problems(problems: pd.DataFrame, board: Board, split: str, secret: bytes | None = None,
                    round_: int = 1) -> pd.DataFrame:
    """The split's problems: dev = the first ``items['dev']`` of the public shuffle, test = a secret draw of
    ``items['test']`` from the rest."""
    order = list(range(len(problems)))
    random.Random(split_seed(board, "dev")).shuffle(order)
    n_dev = board.items["dev"]
    if split == "dev":
        picked = order[:n_dev]
    else:
        rest = order[n_dev:]
        picked = random.Random(split_seed(board, "test", secret, round_)).sample(rest, min(board.items["test"], len(rest)))
    return problems.iloc[picked].reset_index(drop=True)


def as_items(problems: pd.DataFrame, board: Board) -> pd.DataFrame:
    """Board rows (``items.COLUMNS``): the prompt is the context, no separate question, one answer each."""
    rows = [{"item": f"{TASK}/{p.unique_id}/0", "context_id": f"{TASK}/{p.unique_id}", "task": TASK, "length": 0,
             "context": PROMPT.format(problem=p.problem), "question": "", "answer_prefix": "", "answer": [str(p.answer)],
             "max_new_tokens": int(board.max_new_tokens or 16384)} for p in problems.itertuples(index=False)]
    return pd.DataFrame(rows, columns=COLUMNS)


def math_items(board: Board, split: str, secret: bytes | None = None, round_: int = 1) -> pd.DataFrame:
    """The MATH-500 items of ``board``'s ``split`` (``NotMeasurable`` without the hub)."""
    items = as_items(select_problems(load_problems(), board, split, secret, round_), board)
    items.attrs.update(split=split, board=board.name, source="hf")
    return items
