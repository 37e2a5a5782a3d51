"""Render a RULER row exactly as KVPress's pipeline feeds it to a model without a chat template.

``bos + context`` is the prefilled (compressed) part; ``question + "\\n" + answer_prefix`` is fed
after it; the answer the model should produce follows, then ``eos``. Training uses the same
rendering so the embedded model meets at evaluation exactly what it was trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ruler.templates import task_family


def answer_text(task: str, answers: Sequence[str]) -> str:
    """The continuation a correct model writes after the answer prefix, per task family."""
    family = task_family(task)
    if family == "niah":
        if len(answers) == 1:
            return f" {answers[0]}."
        return " " + ", ".join(answers[:-1]) + f", and {answers[-1]}."
    if family == "vt":
        return " ".join(answers)
    if family == "cwe":
        return " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(answers))
    if family == "fwe":
        return " " + " ".join(answers)
    return " " + answers[0]


def render_ids(tokenizer: Any, context: str, question: str, answer_prefix: str,
               answer: str | None = None) -> tuple[list[int], list[int], list[int]]:
    """Token ids of (bos + context), (question + "\\n" + answer_prefix) and (answer + eos).

    Tokenised in the three pieces KVPress tokenises separately (``add_special_tokens=False``).
    """
    ctx = [tokenizer.bos_token_id] + tokenizer.encode(context, add_special_tokens=False)
    q = tokenizer.encode(question + "\n" + answer_prefix, add_special_tokens=False)
    a = [] if answer is None else tokenizer.encode(answer, add_special_tokens=False) + [tokenizer.eos_token_id]
    return ctx, q, a
