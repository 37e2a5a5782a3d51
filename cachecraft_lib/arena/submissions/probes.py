"""Probe texts a submission declares in ``metadata.yaml`` (``probes: [...]``), run by the harness after the context.

Why the harness runs them and not the method: a method has no model (numpy only, in the sandbox). probevr's idea,
scoring the context by the attention of a question of its own ("List every name, number, code, and key fact stated
in the text above"), needs the model's queries for that text; KVzip's replay is the trusted precedent. The texts are
fixed before the method runs (they are in the metadata, part of the submission's identity), bounded in number
(``MAX_PROBES``), characters (``MAX_PROBE_CHARS``) and tokens (``MAX_PROBE_TOKENS``), and on a query-agnostic board
a probe may never carry the board's question (``check_not_question``, per context, before anything runs): the
question is what the board hides from the compression.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from .errors import SubmissionError

MAX_PROBES = 4
MAX_PROBE_CHARS = 400
MAX_PROBE_TOKENS = 128


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


def normalise(text: str) -> str:
    """Text as the question check compares it: NFKC, casefold, only letters and digits, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def check_not_question(probes: Iterable[str], questions: Iterable[str]) -> None:
    """On a query-agnostic board: ``SubmissionError("probe_is_question")`` when a probe contains a question of the
    context (after ``normalise``; a question contained in a probe, or equal to it, leaks it to the compression)."""
    for question in questions:
        q = normalise(question)
        if not q:
            continue
        for probe in probes:
            if q in normalise(probe):
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
