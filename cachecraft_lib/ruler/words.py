"""Word lists and the offline haystacks used by the RULER generator.

RULER draws needle keys and common words from the ``wonderwords`` lists, which ship on PyPI, so
those are used as is. The Paul Graham essay haystack is not available offline; it is replaced by
deterministic synthetic prose (``synthetic_essay_words``), labelled as a substitute everywhere.
"""

from __future__ import annotations

import functools
import random
from importlib import resources

ESSAY_SEED = 20240613  # fixed: the essay haystack is the same text for every sample and seed, as in RULER


@functools.cache
def wonderwords_list(name: str) -> tuple[str, ...]:
    """One of wonderwords' asset lists (``nounlist``, ``adjectivelist``, ``verblist``), blanks removed."""
    text = resources.files("wonderwords").joinpath("assets", f"{name}.txt").read_text(encoding="utf-8")
    return tuple(w.strip() for w in text.splitlines() if w.strip())


@functools.cache
def nouns() -> tuple[str, ...]:
    return wonderwords_list("nounlist")


@functools.cache
def adjectives() -> tuple[str, ...]:
    return wonderwords_list("adjectivelist")


@functools.cache
def verbs() -> tuple[str, ...]:
    return wonderwords_list("verblist")


@functools.cache
def cwe_words(seed: int) -> tuple[str, ...]:
    """RULER's common-words pool: sorted union of nouns, adjectives and verbs, shuffled by ``seed``.

    Only plain lowercase single words are kept so that a word never contains another one's
    numbering or spacing (RULER's list also holds a few multi-word entries; they would make the
    "10 most common words" ambiguous under substring scoring).
    """
    pool = sorted({w for w in nouns() + adjectives() + verbs() if w.isalpha() and w.islower()})
    random.Random(seed).shuffle(pool)
    return tuple(pool)


def random_key_word(rng: random.Random) -> str:
    """An ``adjective-noun`` key, uniform over RULER's pair list (sampled without building it)."""
    return f"{rng.choice(adjectives())}-{rng.choice(nouns())}"


_SUBJECTS = ("the founder", "a good essay", "every startup", "the best programmer", "a small team",
             "the investor", "a new idea", "the market", "most people", "a careful writer",
             "the first version", "a young company", "the user", "a determined hacker", "the city")
_VERBS_T = ("builds", "changes", "questions", "explains", "ignores", "discovers", "measures", "rewrites",
            "remembers", "shapes", "admires", "protects", "follows", "simplifies", "tests")
_OPENERS = ("In practice,", "Surprisingly,", "For a long time,", "Usually,", "In the end,", "At first,",
            "Oddly enough,", "Most of the time,", "Years later,", "In my experience,")


def _essay_sentence(rng: random.Random) -> str:
    adj = rng.choice(adjectives())
    noun = rng.choice(nouns())
    noun2 = rng.choice(nouns())
    shape = rng.randrange(5)
    if shape == 0:
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS_T)} the {adj} {noun}"
    elif shape == 1:
        s = f"{rng.choice(_OPENERS)} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS_T)} a {noun} with a {adj} {noun2}"
    elif shape == 2:
        s = f"what matters is not the {noun} but the {adj} {noun2} behind it"
    elif shape == 3:
        s = f"if you {rng.choice(verbs())} the {noun}, {rng.choice(_SUBJECTS)} will {rng.choice(verbs())} it too"
    else:
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS_T)} how a {adj} {noun} can {rng.choice(verbs())} a {noun2}"
    return s[0].upper() + s[1:] + "."


class _EssayStream:
    """An endless, deterministic stream of synthetic essay words; any prefix is stable."""

    def __init__(self) -> None:
        self._rng = random.Random(ESSAY_SEED)
        self.words: list[str] = []

    def ensure(self, n_words: int) -> list[str]:
        while len(self.words) < n_words:
            paragraph = " ".join(_essay_sentence(self._rng) for _ in range(self._rng.randint(4, 9)))
            self.words.extend(paragraph.split(" "))
        return self.words


_ESSAY = _EssayStream()


def synthetic_essay_words(n_words: int) -> list[str]:
    """The first ``n_words`` words of the synthetic essay haystack (offline substitute for PG essays)."""
    return _ESSAY.ensure(n_words)[:n_words]


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences at '. ', '! ' or '? ' (the synthetic essay has no abbreviations)."""
    out: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(text[start : i + 1].strip())
            start = i + 1
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return [s for s in out if s]
