"""Who and what a submission is called, compared the way the arena compares them.

Identities: a name may not be a baseline's or the uncompressed reference's (``reserved_names``, compared by
``name_key``: Unicode NFKC, casefold, invisible characters removed, ``-``/``_`` alike), and authors are compared
by ``author_key`` (NFKC, casefold, invisible characters removed, inner whitespace collapsed), so "Agent1",
"agent1 " and "agent\u200b1" are one author for the rate limit.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from .errors import SubmissionError

REFERENCE_NAMES = frozenset({"full", "no_press", "nopress", "none", "uncompressed", "reference", "full_cache",
                             "baseline", "baselines"})
INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                       "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]")


# Letter names (after ``LETTER`` in unicodedata.name) that draw like a Latin letter in common fonts
NAMED_LOOKALIKES = {"ALPHA": "a", "BETA": "b", "EPSILON": "e", "ETA": "n", "IOTA": "i", "KAPPA": "k", "NU": "v",
                    "OMICRON": "o", "RHO": "p", "TAU": "t", "UPSILON": "u", "CHI": "x", "OH": "o", "OMEGA": "w",
                    "PALOCHKA": "l", "ES": "c", "IE": "e", "ER": "p", "HA": "x", "KA": "k", "EM": "m", "EN": "h",
                    "TE": "t", "VE": "b", "U": "y", "DZE": "s", "JE": "j", "QA": "q", "WE": "w", "SHHA": "h",
                    "BYELORUSSIAN-UKRAINIAN I": "i", "SCRIPT G": "g", "DOTLESS I": "i", "DOTLESS J": "j",
                    "OPEN O": "o", "OPEN E": "e", "TURNED E": "e", "SCHWA": "e", "GAMMA": "y", "ZE": "3"}
LETTER_NAME = re.compile(r"\bLETTER (?:SMALL CAPITAL |CAPITAL |SMALL )?(.+)$")


# Cyrillic and Greek letters that look like Latin ones after casefold (NFKC keeps them apart), kept as a first pass
CONFUSABLES = str.maketrans("асеһіјкморԛѕуԝхԁвнтαβεικμορτχ", "acehijkmopqsywxdbhtabeikmoptx")


def _letter(ch: str) -> str:
    """``ch`` as the Latin letter it draws like, from its Unicode name ("LATIN LETTER SMALL CAPITAL P": p,
    "LATIN SMALL LETTER ALPHA": a, "ARMENIAN SMALL LETTER OH": o); ``ch`` itself when the name says nothing."""
    if ch.isascii() or not ch.isalpha():
        return ch
    match = LETTER_NAME.search(unicodedata.name(ch, ""))
    if match is None:
        return ch
    base = match.group(1).split(" WITH ")[0]
    if len(base) == 1 and base.isascii():
        return base.lower()
    return NAMED_LOOKALIKES.get(base, NAMED_LOOKALIKES.get(base.split()[-1], ch) if base.split() else ch)


def _folded(text: str) -> str:
    """NFKD (so a precomposed letter with a dot splits into letter + mark), marks, format, control and invisible
    characters dropped, casefolded, NFKC again (compatibility forms), look-alike letters mapped to Latin."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc", "Mn", "Me", "Co", "Cn"))
    text = unicodedata.normalize("NFKC", INVISIBLE.sub("", text).casefold())
    return "".join(_letter(ch) for ch in text.translate(CONFUSABLES))


def fold(text: str) -> str:
    """Text as the arena compares what it hides (authors, names, probes against questions): NFKD, format,
    control, private-use and combining characters and invisible fillers removed, casefolded, letters of any
    script that draw like a Latin letter folded to it (``CONFUSABLES``, then ``_letter`` by Unicode name)."""
    return _folded(str(text))


# ASCII spellings that read as another: compared only for reserved identities (a baseline's name, the organiser)
ASCII_LOOKALIKES = (("rn", "m"), ("vv", "w"), ("cl", "d"), ("0", "o"), ("1", "l"), ("|", "l"), ("l", "i"),
                    ("5", "s"), ("$", "s"), ("@", "a"))


def skeleton(text: str) -> str:
    """``fold`` and then ASCII look-alikes folded (rn: m, 0: o, 1/l: i, ...), separators removed: two texts with
    one skeleton read alike, so a reserved identity is compared by it."""
    out = re.sub(r"[\s_\-.]", "", fold(text))
    for seen, reads in ASCII_LOOKALIKES:
        out = out.replace(seen, reads)
    return out


def author_key(author: str) -> str:
    """The author as the rate limit counts it: NFKC, casefold, invisible characters removed, common Cyrillic and
    Greek look-alikes of Latin letters folded (``CONFUSABLES``), whitespace trimmed and collapsed."""
    return " ".join(fold(author).split())


def name_key(name: str) -> str:
    """A name as reservation compares it: ``skeleton`` (folded, ASCII look-alikes such as rn/m, 0/o, 1/l/i
    alike, ``-``, ``_``, ``.`` and spaces removed)."""
    return skeleton(str(name))


def reserved_names() -> frozenset[str]:
    """``name_key`` of every arena baseline (prefill and decode-time) and of the uncompressed reference."""
    from ...methods.registry import REGISTRY

    return frozenset(name_key(n) for n in (*(n for n, m in REGISTRY.items() if m.arena_baseline), *REFERENCE_NAMES))


ORGANISER = "cachecraft"  # the author of the shipped examples and baselines
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Characters an author or name may never hold: format (tag characters U+E0000-E007F, zero-width, bidi), private
# use, unassigned, surrogates and the invisible fillers; they make one identity read as another
HIDDEN_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Cs"})


def shipped_names() -> frozenset[str]:
    """``name_key`` of every shipped example (``arena/examples/*``, baselines included): the organiser's."""
    found = [p.name for p in EXAMPLES.iterdir() if p.is_dir()] if EXAMPLES.is_dir() else []
    base = EXAMPLES / "baselines"
    found += [p.name for p in base.iterdir() if p.is_dir()] if base.is_dir() else []
    return frozenset(name_key(n) for n in found if n != "baselines")


def is_shipped(folder: Path) -> bool:
    """``folder`` (resolved) is one of the organiser's shipped examples: a path check, never a declared name."""
    real = Path(folder).resolve()
    return real.parent == EXAMPLES or real.parent == EXAMPLES / "baselines"


def check_identity(name: str, author: str, organiser: bool = False) -> None:
    """Refuse hidden characters in ``name``/``author``, a reserved name (``check_name``) and, unless ``organiser``
    (a shipped example, found by its path), the organiser's author or a shipped example's name, compared by
    ``skeleton`` so look-alikes (``cachecrafṭ``, ``cachecrɑft``, ``knorrn``, ``t0va``) are the same identity."""
    for what, text in (("name", name), ("author", author)):
        if any(unicodedata.category(ch) in HIDDEN_CATEGORIES or INVISIBLE.match(ch) for ch in text):
            raise SubmissionError("bad_metadata", f"metadata.yaml's {what} holds an invisible or format character "
                                                  "(zero-width, tag, bidi); write it in plain visible letters")
    check_name(name)
    if organiser:
        return
    if skeleton(author) == skeleton(ORGANISER):
        raise SubmissionError("reserved_name", f"the author {ORGANISER!r} (in any spelling) is the organiser's; "
                                               "write your own name as author in metadata.yaml")
    if name_key(name) in shipped_names():
        raise SubmissionError("reserved_name", "the name is a shipped example's (in some spelling); choose another "
                                               "name in metadata.yaml")


def check_name(name: str) -> None:
    """``SubmissionError("reserved_name")`` when ``name`` is a baseline's or the reference's, in any spelling."""
    if name_key(name) in reserved_names():
        raise SubmissionError("reserved_name", f"name {name!r} is a baseline's or the uncompressed reference's; "
                                               "choose another name in metadata.yaml")
