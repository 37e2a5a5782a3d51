"""A DESCRIPTION.md's sections, and the numbers it claims about its dev run checked against the dev report.

A claim is a score word (``overall``, ``accuracy``, ``memory``, ``speed``, ``overhead``, ``gain``) followed within
a few words by a number, in a sentence of the Evidence section that does not cite another source (``paper``,
``published``, ``et al``, a link, ``test``): those sentences speak of the arena's dev run, which the dev report
records. ``0.512``, ``+0.02`` and ``51.2%`` are numbers. A claim matches when some method's value of that term
in the dev report (of the methods the sentence names, if it names any) is within the claim's rounding:
``max(TOLERANCE, half a unit of its last digit)`` (``0.5`` stands for 0.45-0.55, ``0.512`` for 0.507-0.517).
A claim that matches no value is a fabricated number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..submissions.folder import REQUIRED_SECTIONS

TOLERANCE = 0.005  # a number rounded to two decimals is within 0.005 of the measured value
TERM_WORDS = {"overall": "overall", "score": "overall", "accuracy": "accuracy", "acc": "accuracy",
              "memory": "memory", "speed": "speed", "overhead": "overhead", "gain": "gain", "improvement": "gain"}
OTHER_SOURCE = re.compile(r"\bpaper\b|\bpublished\b|et al|https?://|\btest\b|\bhidden\b|\breported\b", re.I)
CLAIM = re.compile(r"\b(" + "|".join(TERM_WORDS) + r")\b[^.\d\n]{0,40}?([+-]?\d*\.\d+|[+-]?\d+(?:\.\d+)?\s*%)",
                   re.I)


def sections(text: str) -> dict[str, str]:
    """Markdown heading (lower case) -> its text, as ``submission.check_description`` reads them."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading:
            current = heading.group(1).strip().lower()
            out[current] = ""
        elif current is not None:
            out[current] += line.strip() + " "
    return {k: v.strip() for k, v in out.items()}


def missing_sections(text: str) -> list[str]:
    """Required sections that are absent or empty."""
    found = sections(text)
    return [s for s in REQUIRED_SECTIONS if not found.get(s.lower())]


@dataclass(frozen=True)
class Claim:
    """A number the description states about a term, and what the dev report says."""

    sentence: str
    term: str
    value: float
    tolerance: float
    method: str | None
    matched: bool
    measured: tuple[float, ...]


def _number(text: str) -> tuple[float, float]:
    """The value of a claimed number and its rounding tolerance."""
    text = text.replace(" ", "")
    scale = 0.01 if text.endswith("%") else 1.0
    digits = text.rstrip("%")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits) * scale, max(TOLERANCE, 0.5 * 10 ** -decimals * scale)


def _measured(report: dict, term: str, methods: list[str]) -> tuple[float, ...]:
    if term == "gain":
        gain = report.get("gain") or {}
        return tuple(float(gain[k]) for k in ("point", "lo", "hi") if gain.get(k) is not None)
    rows = report.get("scores", {})
    chosen = [rows[m] for m in methods] if methods else list(rows.values())
    return tuple(float(r[term]) for r in chosen if r.get(term) is not None)


def _named_methods(sentence: str, report: dict) -> list[str]:
    """The dev report's methods the sentence names (``streaming_llm`` also as "streaming llm")."""
    return [name for name in report.get("scores", {})
            if re.search(rf"(?<![\w-]){re.escape(name).replace('_', '[_ -]?')}(?![\w-])", sentence, re.I)]


def check_claims(description: str, report: dict) -> list[Claim]:
    """Every claim of the Evidence section about the dev run, checked against ``report`` (``dev_report_json``)."""
    evidence = sections(description).get("evidence", "")
    claims = []
    for sentence in re.split(r"(?<=[.;!?])\s+(?=[A-Z(])|\n", evidence):
        if OTHER_SOURCE.search(sentence):
            continue
        methods = _named_methods(sentence, report)
        for match in CLAIM.finditer(sentence):
            term = TERM_WORDS[match.group(1).lower()]
            value, tol = _number(match.group(2))
            measured = _measured(report, term, methods)
            hit = any(abs(value - m) <= tol + 1e-12 for m in measured)
            claims.append(Claim(sentence.strip(), term, value, tol, ", ".join(methods) or None, hit, measured))
    return claims
