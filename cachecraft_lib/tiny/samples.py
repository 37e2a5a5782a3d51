"""Training rows of the embedded model: RULER samples with extra questions, answer orders and repeat marks."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from ..ruler.dataset import fit_haystack
from ..ruler.documents import ENTITY_DOC, QA1_QUESTIONS
from ..ruler.tasks import GENERATORS, TaskState
from ..ruler.templates import (
    CWE_TEMPLATE,
    NIAH_PREFIX,
    NIAH_TEMPLATE,
    fill,
    niah_number,
    split_context_question,
)
from ..ruler.tokens import as_counter
from .render import answer_text, render_ids


class SampleStream:
    """Training sequences of any task at any length, sized once per (task, length) like RULER."""

    def __init__(self, tokenizer: Any, seed: int) -> None:
        self.tokenizer = tokenizer
        self.count = as_counter(tokenizer)
        self.seed = seed
        self._fit: dict[tuple[str, int], int | None] = {}

    def haystack_size(self, task: str, length: int) -> int | None:
        key = (task, length)
        if key not in self._fit:
            try:
                self._fit[key] = fit_haystack(task, length, self.count, self.seed)
            except ValueError:  # the task does not fit this short a length
                self._fit[key] = None
        return self._fit[key]

    def sample(self, task: str, length: int, rng: random.Random, extra_questions: int = 8,
               dense_qa: bool = False, ordered_sets: bool = False, set_orders: int = 0,
               repeats: bool = False) -> Row | None:
        """One context with its RULER question and, for NIAH, extra questions about other needles.

        Each (question, answer) block sees the context and itself only (block mask, positions
        restarting after the context), which is exactly KVPress's multi-question rendering:
        dense answer supervision without changing what the model sees at evaluation. ``repeats`` fills
        ``Row.avoid`` (see ``repeat_tokens``) for every block whose answer lists several items.
        """
        n = self.haystack_size(task, length)
        if n is None:
            return None
        n = max(1, int(n * rng.uniform(0.85, 1.0)))  # vary fill so the model sees every depth scale
        text, answers = GENERATORS[task].build(n, rng, TaskState(length, rng.randrange(1 << 30)))
        context, question, prefix = split_context_question(text, task)
        if ordered_sets and task in SET_TASKS:
            own = max(context.rfind(SET_TASKS[task]), 0)  # skip a one-shot example
            answers = in_context_order(answers, context[own:])
        qas = [(question, prefix, answers)]
        if task.startswith("niah") and extra_questions:
            qas += niah_extra_questions(context, question, rng, extra_questions)
        if task.startswith("qa") and dense_qa and extra_questions:
            qas += qa_extra_questions(context, question, prefix, rng, extra_questions)
        if set_orders and task in SHUFFLABLE_TASKS:
            qas += [(question, prefix, order) for order in other_orders(answers, set_orders, rng)]
        ctx_ids = render_ids(self.tokenizer, context, "", "")[0]
        ids, weights, blocks = list(ctx_ids), [0.0] * len(ctx_ids), [0] * len(ctx_ids)
        positions = list(range(len(ctx_ids)))
        avoid: dict[int, tuple[int, ...]] = {}
        for b, (q_text, q_prefix, q_answers) in enumerate(qas, start=1):
            answer = answer_text(task, q_answers)  # not ``text``: that is the row the context came from
            _, q, a = render_ids(self.tokenizer, "", q_text, q_prefix, answer)
            if repeats and len(q_answers) > 1:
                start = len(ids) + len(q)
                avoid |= {start + i: toks for i, toks in repeat_tokens(self.tokenizer, answer, q_answers).items()}
            ids += q + a
            weights += [0.0] * len(q) + [1.0] * len(a)
            blocks += [b] * (len(q) + len(a))
            positions += list(range(len(ctx_ids), len(ctx_ids) + len(q) + len(a)))
        return Row(ids, weights, blocks, positions, avoid)


@dataclass
class Row:
    """One training sequence: ids, loss weights, block id (0 = context) and position id per token;
    ``avoid`` maps a token's index to the ids that would repeat an earlier answer item there."""

    ids: list[int]
    weights: list[float]
    blocks: list[int]
    positions: list[int]
    avoid: dict[int, tuple[int, ...]] = field(default_factory=dict)


def repeat_tokens(tokenizer: Any, answer: str, items: list[str]) -> dict[int, tuple[int, ...]]:
    """Index in ``answer``'s tokens -> the ids that would turn the item being written there into a copy of
    an earlier item: for each earlier item, the answer is tokenised again with that item written in place
    of the current one, and the first token where the two differ is the one to avoid there. The true next
    token is never among them."""
    def encode(text: str) -> list[int]:  # as render_ids encodes an answer
        return tokenizer.encode(text, add_special_tokens=False)

    ids = encode(answer)
    out: dict[int, set[int]] = {}
    cursor, starts = 0, []
    for item in items:
        at = answer.find(item, cursor)
        if at < 0:  # the answer does not show this item
            continue
        cursor = at + len(item)
        for earlier in starts:
            copy = encode(answer[:at] + earlier)
            d = next((i for i, (a, b) in enumerate(zip(ids, copy, strict=False)) if a != b), None)
            if d is not None:
                out.setdefault(d, set()).add(copy[d])
        starts.append(item)
    return {i: tuple(sorted(v)) for i, v in sorted(out.items())}


# tasks RULER scores by recall of a list of several answers, in any order (string_match_all): the answer
# may be written in any order (niah_multiquery's follows its question's keys, so it is not one of them)
SHUFFLABLE_TASKS = ("niah_multivalue", "vt", "cwe", "fwe")
# tasks whose answer is an unordered set -> where their own context starts (after any one-shot example)
SET_TASKS = {"niah_multivalue": NIAH_TEMPLATE.split("{")[0], "cwe": CWE_TEMPLATE.split("\n")[0]}


def in_context_order(answers: list[str], context: str) -> list[str]:
    """``answers`` sorted by where each first appears in ``context`` as a whole word (absent ones last)."""
    def first(a: str) -> int:
        found = re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", context)
        return found.start() if found else len(context)

    return sorted(answers, key=first)


def other_orders(answers: list[str], n: int, rng: random.Random) -> list[list[str]]:
    """Up to ``n`` distinct orders of ``answers``, none the given one (fewer when there are not so many)."""
    seen, out = {tuple(answers)}, []
    limit = math.factorial(min(len(answers), 10))
    for _ in range(8 * n):
        if len(out) >= n or len(seen) >= limit:
            break
        order = rng.sample(answers, len(answers))
        if tuple(order) not in seen:
            seen.add(tuple(order))
            out.append(order)
    return out


_NEEDLE = re.compile(r"One of the special magic (numbers|uuids) for ([\w-]+) is: ([\w-]+)\.")


def niah_extra_questions(context: str, asked: str, rng: random.Random, limit: int) -> list[tuple[str, str, list[str]]]:
    """Questions, in RULER's own wording, about needles of ``context`` other than the one ``asked``."""
    by_key: dict[str, list[str]] = {}
    found = _NEEDLE.findall(context)
    for _, key, value in found:
        by_key.setdefault(key, []).append(value)
    kind = found[0][0] if found else "numbers"  # one value type per context
    keys = [k for k in by_key if k not in asked]
    out = []
    for key in rng.sample(keys, min(limit, len(keys))):
        values = by_key[key]
        singular = len(values) == 1
        template = niah_number(NIAH_TEMPLATE + NIAH_PREFIX, singular)
        text = fill(template, type_needle_v=kind[:-1] if singular else kind, context="", query=key)
        _, question, prefix = split_context_question(text, "niah_single_1")
        out.append((question, prefix, values))
    return out


def qa_extra_questions(context: str, asked: str, prefix: str, rng: random.Random,
                       limit: int) -> list[tuple[str, str, list[str]]]:
    """Single-hop questions, in the QA task's own wording, about institutions of ``context`` other than the
    one ``asked``: every document becomes a supervised retrieval, as every needle does for NIAH."""
    head = asked[: asked.rindex("Question:") + len("Question:")] if "Question:" in asked else ""
    tail = asked[asked.rindex("?") + 1:] if "?" in asked else ""  # keep the task's exact spacing
    out = []
    entities = [m for m in ENTITY_DOC.findall(context) if m[0] not in asked]
    for name, city, year, founder, product in rng.sample(entities, min(limit, len(entities))):
        values = {"city": city, "year": year, "founder": founder, "product": product}
        field_name, template = rng.choice(QA1_QUESTIONS)
        out.append((f"{head} {template.format(name=name)}{tail}", prefix, [values[field_name]]))
    return out
