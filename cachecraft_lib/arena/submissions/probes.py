"""Probe texts a submission declares in ``metadata.yaml`` (``probes: [...]``), run by the harness after the context.

Why the harness runs them and not the method: a method has no model (numpy only, in the sandbox). probevr's idea,
scoring the context by the attention of a question of its own ("List every name, number, code, and key fact stated
in the text above"), needs the model's queries for that text; KVzip's replay is the trusted precedent. The texts are
fixed before the method runs (they are in the metadata, part of the submission's identity), bounded in number
(``MAX_PROBES``), characters (``MAX_PROBE_CHARS``) and tokens (``MAX_PROBE_TOKENS``), and on a query-agnostic board
a probe may never carry the board's question (``check_not_question``, per context, before anything runs): the
question is what the board hides from the compression. The comparison is of words after folding away what does
not change the text a model reads (zero-width and other format characters, every kind of space, case, NFKC
forms, combining marks, look-alike letters), and it catches near copies too (the words run together, or most
of them in order with a few changed); a paraphrase in other words is beyond a string check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from difflib import SequenceMatcher
from typing import Any

from .errors import SubmissionError
from .identity import fold

MAX_PROBES = 4
MAX_PROBE_CHARS = 400
MAX_PROBE_TOKENS = 128
NEAR_MIN_WORDS, NEAR_SHARE = 5, 0.8  # a question of 5+ words is carried by a probe holding 80% of them in order
COVER_SHARE = 0.5  # ... or is made (80%) of its words in any order, covering half of them
NEAR_MIN_CHARS = 16  # a question's letters run together are looked for when there are this many (not "x")


def _refuse(kind: str, message: str):
    return SubmissionError(kind, message)


def check_probes(value: Any) -> tuple[str, ...]:
    """The probe texts of ``metadata.yaml``'s ``probes`` (absent: none); ``SubmissionError("bad_probe")``."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise _refuse("bad_probe", f"probes must be a list of texts, got {type(value).__name__}")
    if len(value) > MAX_PROBES:
        raise _refuse("bad_probe", f"metadata.yaml declares {len(value)} probes; at most {MAX_PROBES}")
    for text in value:
        if not text.strip():
            raise _refuse("bad_probe", "a probe is empty; remove it or give it text")
        if len(text) > MAX_PROBE_CHARS:
            raise _refuse("bad_probe", f"a probe has {len(text)} characters; at most {MAX_PROBE_CHARS}")
    return tuple(value)


def words(text: str) -> list[str]:
    """The words the question check compares: ``identity.fold`` (NFKC; format characters such as zero-width
    spaces and joiners, controls, combining marks and fillers removed; casefold; look-alike letters folded),
    then runs of letters and digits (every kind of space, punctuation and symbol separates words)."""
    return re.findall(r"[^\W_]+", fold(text))


def normalise(text: str) -> str:
    """Text as the question check compares it: ``words`` joined by single spaces."""
    return " ".join(words(text))


def _near_copy(question: list[str], probe: list[str]) -> bool:
    """``probe`` holds ``question``: its words in a row, its letters with the separators removed (a question
    whose words were run together), or, for a question of ``NEAR_MIN_WORDS`` or more, at least ``NEAR_SHARE``
    of its words in order (a question with a word or two changed, added or dropped); the letters run together
    only for a question of ``NEAR_MIN_CHARS`` letters or more (a short one would be found inside any text)."""
    if f" {' '.join(question)} " in f" {' '.join(probe)} ":
        return True
    joined = "".join(question)
    if len(joined) >= NEAR_MIN_CHARS and joined in "".join(probe):
        return True
    if len(question) < NEAR_MIN_WORDS:
        return False
    blocks = SequenceMatcher(None, question, probe, autojunk=False).get_matching_blocks()
    if sum(b.size for b in blocks) >= NEAR_SHARE * len(question):
        return True
    return _made_of_question(set(question), probe)


def _made_of_question(question: set[str], probe: list[str]) -> bool:
    """``probe`` (``NEAR_MIN_WORDS`` or more words) is at least ``NEAR_SHARE`` the question's words, in any order,
    and covers at least ``COVER_SHARE`` of them: the question reordered, or its template with the key left out
    (11 of its 14 words), which the in-order share of the question alone misses."""
    if len(probe) < NEAR_MIN_WORDS:
        return False
    shared = sum(w in question for w in probe)
    return shared >= NEAR_SHARE * len(probe) and len(question & set(probe)) >= COVER_SHARE * len(question)


def _foreign_letters(probes: list[list[str]], questions: list[str]) -> bool:
    """A probe keeps a non-ASCII letter after ``fold`` while every question is ASCII: a look-alike letter the
    fold does not know (a probe for an English board needs none)."""
    return all(q.isascii() for q in questions) and any(not "".join(p).isascii() for p in probes)


def check_not_question(probes: Iterable[str], questions: Iterable[str]) -> None:
    """On a query-agnostic board: ``SubmissionError("probe_is_question")`` when a probe carries a question of the
    context (``words`` of both compared by ``_near_copy``: a question contained in a probe, equal to it, or a
    near copy of it leaks it to the compression)."""
    probe_words, questions = [words(p) for p in probes], list(questions)
    if _foreign_letters(probe_words, questions):
        raise _refuse("bad_probe", "a probe holds letters outside the Latin alphabet while the board's questions "
                                   "are in it; write the probe in plain Latin letters")
    for question in questions:
        q = words(question)
        if not q:
            continue
        if any(_near_copy(q, p) for p in probe_words):
            raise _refuse("probe_is_question", "a probe contains the board's question; on a query-agnostic "
                                               "board the compression may not see the question: use a probe "
                                               "written before the board's items are known")


def probe_ids(tokenizer: Any, probes: Iterable[str]) -> list:
    """Token ids (1, n) per probe, each cut at ``MAX_PROBE_TOKENS`` (a refusal, not a silent cut)."""
    out = []
    for text in probes:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        if ids.shape[1] > MAX_PROBE_TOKENS:
            raise _refuse("bad_probe", f"a probe is {ids.shape[1]} tokens; at most {MAX_PROBE_TOKENS}")
        out.append(ids)
    return out
