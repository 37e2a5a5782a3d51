"""Which RULER items a board scores: the public dev split and the hidden test split, drawn through ``splits``.

The dev split is generated from the board's public seed (``splits.dev_seed``) and cached like any RULER set.
The test split is generated from a seed derived from the secret (``splits.test_seed``) and is never written to
disk here: whoever can read the checkout can read ``data/ruler/``, so a cached test set would not be hidden.

On query-agnostic boards (B) each context carries several questions (``questions_per_context``): the RULER
question plus questions, in RULER's own wording, about the context's other needles (NIAH) or documents (QA),
as the embedded model was trained to answer (``tiny.samples``). One compressed cache answers all of them.
With the hub reachable (``paper`` profile), items are drawn from ``simonjegou/ruler`` by the same seeds, dev
and test from two disjoint halves of each task's rows (``hub_part``), so no context is in both splits.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pandas as pd

from ...profiles import PROFILES
from ...ruler import dataset as ruler_data
from ...tiny.samples import niah_extra_questions, qa_extra_questions
from .boards import Board

SPLITS = ("dev", "test")
COLUMNS = ["item", "context_id", "task", "length", "context", "question", "answer_prefix", "answer",
           "max_new_tokens"]


def split_seed(board: Board, split: str, secret: bytes | None = None, round_: int = 1) -> int:
    """The generator seed of a split: public for dev, derived from the secret for test."""
    from . import splits

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    splits.guard_split(split)  # search.dev_only's guard, when installed, refuses every split but dev
    if split == "dev":
        return splits.dev_seed(board.name)
    if secret is None:
        raise ValueError("the test split needs the arena secret (splits.load_secret())")
    return splits.test_seed(secret, board.name, round_)


def board_items(board: Board, split: str, tokenizer: Any, secret: bytes | None = None, round_: int = 1,
                source: str = "offline") -> pd.DataFrame:
    """The items of ``board``'s ``split``: one row per (context, question), KVPress's RULER columns plus ids."""
    from .splits import guard_split

    guard_split(split)  # before anything is drawn (search.dev_only's guard refuses every split but dev)
    seed = split_seed(board, split, secret, round_)
    per_task = board.items[split]
    frames = []
    for length in board.lengths:
        rows = _contexts(length, tokenizer, per_task, seed, board.tasks, source, cache=split == "dev", split=split)
        frames.append(_expand(rows, length, board.questions_per_context, seed))
    items = pd.concat(frames, ignore_index=True)[COLUMNS]
    cap = PROFILES[board.profile].max_new_tokens if board.profile in PROFILES else None
    if cap is not None:
        items["max_new_tokens"] = items["max_new_tokens"].clip(upper=cap)
    items.attrs.update(split=split, board=board.name, seed=seed if split == "dev" else None, source=source)
    return items


def generated_contexts(board: Board, tokenizer: Any, seed: int, source: str = "offline") -> pd.DataFrame:
    """One context per task at the board's first length, drawn by ``seed`` as a split's are (never cached):
    what a judge prefills to compare methods on layers like the board's (from the hub's dev half: public)."""
    return _contexts(board.lengths[0], tokenizer, 1, seed, board.tasks, source, cache=False, split="dev")


def _contexts(length: int, tokenizer: Any, per_task: int, seed: int, tasks: tuple[str, ...], source: str,
              cache: bool, split: str) -> pd.DataFrame:
    if source == "hf" or (source == "auto" and ruler_data.hub_reachable()):
        return _hub_contexts(ruler_data.load_hf(length), per_task, seed, tasks, split)
    if cache:
        return ruler_data.load_offline(length, tokenizer, per_task, seed, list(tasks))
    return ruler_data.generate(length, tokenizer, per_task, seed, list(tasks))


def hub_part(context: str) -> str:
    """The split a hub row may be drawn into, fixed by its context's text alone (a public digest): dev and test
    are disjoint by construction, whatever the seeds and sample sizes, and about half the rows go to each."""
    return SPLITS[hashlib.sha256(context.encode()).digest()[0] & 1]


def _hub_contexts(df: pd.DataFrame, per_task: int, seed: int, tasks: tuple[str, ...], split: str) -> pd.DataFrame:
    """``per_task`` rows of each task of KVPress's RULER (``df``) from ``split``'s half, chosen by its seed."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    df = df[df["task"].isin(tasks) & (df["context"].map(hub_part) == split)]
    picked = [rows.sample(n=min(per_task, len(rows)), random_state=seed % 2**32)
              for _, rows in df.groupby("task", sort=False)]
    return pd.concat(picked, ignore_index=True)


def _expand(rows: pd.DataFrame, length: int, questions: int, seed: int) -> pd.DataFrame:
    """One row per (context, question): the RULER question first, then up to ``questions - 1`` extra ones."""
    out = []
    counter: dict[str, int] = {}
    for row in rows.itertuples(index=False):
        i = counter.get(row.task, 0)
        counter[row.task] = i + 1
        context_id = f"{length}/{row.task}/{i}"
        qas = [(row.question, row.answer_prefix, list(row.answer))]
        if questions > 1:
            rng = random.Random(f"{seed}|{context_id}")
            if row.task.startswith("niah"):
                qas += niah_extra_questions(row.context, row.question, rng, questions - 1)
            elif row.task.startswith("qa"):
                qas += qa_extra_questions(row.context, row.question, row.answer_prefix, rng, questions - 1)
        for q, (question, prefix, answer) in enumerate(qas):
            out.append({"item": f"{context_id}/{q}", "context_id": context_id, "task": row.task, "length": length,
                        "context": row.context, "question": question, "answer_prefix": prefix,
                        "answer": list(answer), "max_new_tokens": int(row.max_new_tokens)})
    return pd.DataFrame(out, columns=COLUMNS)
