"""Grading MATH-500 answers (board C on the paper profile): the last ``\\boxed{...}`` against the reference.

KVPress's math scorer takes ``answer.split("boxed{")[-1].split("}")[0]``, which cuts ``\\boxed{\\frac{1}{2}}`` to
``\\frac{1``: every answer with a brace inside (fractions, roots, sets, matrices) is graded wrong. Here
``last_boxed`` matches braces (``\\boxed{...}``, ``\\fbox{...}`` and ``\\boxed 5``), and ``grade`` compares
with Hugging Face's ``math-verify`` (symbolic and numeric equivalence: ``\\dfrac{1}{2}`` = ``0.5``,
``(3, \\frac{\\pi}{2})`` = ``\\left( 3, \\frac{\\pi}{2} \\right)``). Where ``math-verify`` is not importable, or
fails on an expression, a normalised string comparison decides (``math-verify`` is a dependency; the fallback
keeps grading deterministic rather than crashing on an exotic answer).
"""

from __future__ import annotations

import re

__all__ = ["grade", "last_boxed", "normalise"]

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces matched, nested ones kept), or None."""
    found = None
    for match in _BOX.finditer(text):
        i = match.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    found = text[i + 1:j]
                    break
                j += 1
        elif i < len(text):  # ``\boxed 5``: up to the next space or dollar sign
            found = re.split(r"[\s$]", text[i:], maxsplit=1)[0] or found
    return found


def normalise(answer: str) -> str:
    """A canonical string: no spaces, ``\\left``/``\\right``, ``\\!``, ``dfrac``/``tfrac``, ``^\\circ``, trailing dot,
    enclosing ``$`` or ``\\text{...}`` units kept as text."""
    s = answer.strip().strip("$").strip()
    for old, new in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("dfrac", "frac"),
                     ("tfrac", "frac"), ("^\\circ", ""), ("^{\\circ}", ""), ("\\%", ""), ("%", "")):
        s = s.replace(old, new)
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if re.fullmatch(r"-?\d+\.0+", s):
        s = s.split(".")[0]
    return s


def _verify(gold: str, predicted: str) -> bool | None:
    """math-verify's verdict, or None where it is missing or cannot parse either side."""
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    try:
        g = parse(f"${gold}$")
        p = parse(f"${predicted}$")
        if not g or not p:
            return None
        return bool(verify(g, p))
    except Exception:  # noqa: BLE001 - a parser failure falls back to the string comparison
        return None


def grade(response: str, reference: str) -> bool:
    """pass@1 of one response: its last boxed answer equals the reference (symbolically where possible)."""
    predicted = last_boxed(response)
    if predicted is None:
        return False
    gold = last_boxed(reference) or reference
    if normalise(predicted) == normalise(gold):
        return True
    return bool(_verify(gold, predicted))
