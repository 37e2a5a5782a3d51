"""Who and what a submission is called, compared the way the arena compares them.

Identities: a name may not be a baseline's or the uncompressed reference's (``reserved_names``, compared by
``name_key``: Unicode NFKC, casefold, invisible characters removed, ``-``/``_`` alike), and authors are compared
by ``author_key`` (NFKC, casefold, invisible characters removed, inner whitespace collapsed), so "Agent1",
"agent1 " and "agent\u200b1" are one author for the rate limit.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import SubmissionError

REFERENCE_NAMES = frozenset({"full", "no_press", "nopress", "none", "uncompressed", "reference", "full_cache",
                             "baseline", "baselines"})
INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                       "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]")


def _folded(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc", "Mn", "Me"))
    return INVISIBLE.sub("", text).casefold()


# Cyrillic and Greek letters that look like Latin ones after casefold (NFKC keeps them apart): a small table of
# the common look-alikes, not Unicode's full confusables list; the author stays a declared string (README, Trust)
CONFUSABLES = str.maketrans("асеһіјкморԛѕуԝхԁвнтαβεικμορτχ", "acehijkmopqsywxdbhtabeikmoptx")


def fold(text: str) -> str:
    """Text as the arena compares what it hides (authors, names, probes against questions): NFKC, format,
    control and combining characters and invisible fillers removed, casefolded, common Cyrillic and Greek
    look-alikes of Latin letters folded (``CONFUSABLES``)."""
    return _folded(str(text)).translate(CONFUSABLES)


def author_key(author: str) -> str:
    """The author as the rate limit counts it: NFKC, casefold, invisible characters removed, common Cyrillic and
    Greek look-alikes of Latin letters folded (``CONFUSABLES``), whitespace trimmed and collapsed."""
    return " ".join(fold(author).split())


def name_key(name: str) -> str:
    """A name as reservation compares it: folded like ``author_key``, ``-``, ``_``, ``.`` and spaces removed."""
    return re.sub(r"[\s_\-.]", "", _folded(str(name)))


def reserved_names() -> frozenset[str]:
    """``name_key`` of every arena baseline (prefill and decode-time) and of the uncompressed reference."""
    from ...methods.registry import REGISTRY

    return frozenset(name_key(n) for n in (*(n for n, m in REGISTRY.items() if m.arena_baseline), *REFERENCE_NAMES))


def check_name(name: str) -> None:
    """``SubmissionError("reserved_name")`` when ``name`` is a baseline's or the reference's, in any spelling."""
    if name_key(name) in reserved_names():
        raise SubmissionError("reserved_name", f"name {name!r} is a baseline's or the uncompressed reference's; "
                                               "choose another name in metadata.yaml")
