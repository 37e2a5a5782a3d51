"""How guessable a secret a person typed is: an upper-bound estimate in bits, and the pattern that made it weak.

``cachecraft arena init`` generates a round's secret itself (256 bits from ``secrets.token_bytes``); a secret
typed by a person is checked here and passes only above ``splits.MIN_SECRET_BITS`` (or with the explicit
``--weak-secret-ok``, which the ledger records). The estimate is the least of several, each an upper bound on
what an attacker who knows the pattern needs to guess:

- *repeats and runs*: the Shannon and zlib sizes of the shortest repeating unit and of the successive
  differences (``"password" * 8`` is one ``"password"``; ``"abcd...xyz0123"`` is a run of steps of one);
- *zxcvbn* (Dropbox's estimator, the maintained ``zxcvbn`` package): dictionary words and names, keyboard walks
  (qwerty, dvorak, keypad), dates, l33t, repeats and sequences; its sums over 72-character pieces;
- *words*: a phrase costs the log-rank of each word in zxcvbn's frequency lists (English text, names, common
  passwords), unknown words 4.7 bits a letter, digits 3.3, other characters 5 and spaces 1 bit: an English
  sentence of 40-odd characters comes to about 80 bits, far below a random string of its length;
- *public sequences*: a substring (or its reverse) of the standard de Bruijn sequence B(k, n) (the
  lexicographically least, FKM's algorithm) over the secret's own alphabet or a common one (binary, digits,
  hex, lowercase, alphanumeric): the guess is which sequence and where, ``log2`` of their count.

It refuses known patterns; it proves nothing random. A secret the arena generated needs none of it.
"""

from __future__ import annotations

import functools
import math
import re
import string
import zlib
from collections import Counter
from dataclasses import dataclass

WORD_BITS = {"letter": math.log2(26), "digit": math.log2(10), "other": 5.0, "space": 1.0}
ALPHABETS = ("01", string.digits[:8], string.digits, string.digits + "abcdef", string.digits + "ABCDEF",
             string.ascii_lowercase, string.ascii_uppercase, string.digits + string.ascii_lowercase,
             string.ascii_letters + string.digits)
MAX_SEQUENCE = 1 << 17  # de Bruijn sequences up to this length are generated and searched
ZXCVBN_PIECE = 72  # zxcvbn's own input limit


@dataclass(frozen=True)
class Strength:
    """The estimate in bits and the pattern that gave the least (``"random-looking"`` when none did better
    than the repeats-and-runs bound)."""

    bits: float
    weakest: str


@functools.lru_cache(maxsize=16)  # zxcvbn takes ~0.2 s; a verb checks the same secret several times
def estimate(secret: bytes) -> Strength:
    """The least of the estimates above (module docstring)."""
    if not secret:
        return Strength(0.0, "empty")
    text = secret.decode("utf-8", errors="replace")
    found = [Strength(runs_bits(secret), "repeats or runs"), _zxcvbn(text), Strength(_words_bits(text), "words"),
             _public_sequence(text)]
    return min((s for s in found if s is not None), key=lambda s: s.bits)


def runs_bits(secret: bytes) -> float:
    """The repeats-and-runs bound: Shannon and zlib sizes of the repeating unit and of the differences."""
    unit = secret[: _period(secret)]
    steps = bytes((b - a) % 256 for a, b in zip(secret, secret[1:], strict=False))
    return min(_shannon_bits(unit), _zlib_bits(unit), 8 + _shannon_bits(steps), 8 + _zlib_bits(steps))


def _shannon_bits(data: bytes) -> float:
    """Length times the empirical Shannon entropy per byte (an upper bound for anything but random text)."""
    counts = Counter(data)
    return max(0.0, -sum(c * math.log2(c / len(data)) for c in counts.values()))


_ZLIB_OVERHEAD = len(zlib.compress(b"", 9))  # header, empty block and checksum: 8 bytes


def _zlib_bits(data: bytes) -> float:
    """Bits zlib needs for ``data`` beyond its fixed overhead: repeated substrings compress away."""
    return 8.0 * max(0, len(zlib.compress(data, 9)) - _ZLIB_OVERHEAD)


def _period(data: bytes) -> int:
    """The length of the shortest unit whose repetition (the last copy possibly cut short) is ``data``."""
    return next((p for p in range(1, len(data)) if data[p:] == data[:-p]), len(data))


_NAMES = {"dictionary": "dictionary words", "spatial": "a keyboard walk", "repeat": "repeats",
          "sequence": "a character sequence", "date": "a date", "regex": "a year"}


def _zxcvbn(text: str) -> Strength:
    """zxcvbn's guesses (log2), summed over pieces of its maximum length; named by its non-bruteforce matches."""
    from zxcvbn import zxcvbn

    bits, kinds = 0.0, Counter()
    for start in range(0, len(text), ZXCVBN_PIECE):
        result = zxcvbn(text[start: start + ZXCVBN_PIECE], max_length=ZXCVBN_PIECE)
        bits += float(result["guesses_log10"]) * math.log2(10)
        kinds.update(m["pattern"] for m in result["sequence"] if m["pattern"] != "bruteforce")
    named = ", ".join(_NAMES.get(k, k) for k, _ in kinds.most_common(2)) or "no known pattern"
    return Strength(bits, f"zxcvbn: {named}")


@functools.lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    """Each word's best rank over zxcvbn's frequency lists."""
    from zxcvbn.matching import RANKED_DICTIONARIES

    best: dict[str, int] = {}
    for ranked in RANKED_DICTIONARIES.values():
        for word, rank in ranked.items():
            best[word] = min(rank, best.get(word, rank))
    return best


def _words_bits(text: str) -> float:
    """A phrase's cost word by word (module docstring): what a guesser walking a frequency list pays."""
    ranks, bits = _ranks(), 0.0
    for token in re.findall(r"[A-Za-z]+|\s+|[0-9]|[^A-Za-z0-9\s]", text):
        if token[0].isalpha():
            rank = ranks.get(token.lower())
            case = 0.0 if token.islower() else 1.0 if token[1:].islower() else len(token)
            bits += (math.log2(rank) + 1 + case) if rank else len(token) * WORD_BITS["letter"]
        elif token.isspace():
            bits += WORD_BITS["space"]
        else:
            bits += WORD_BITS["digit" if token.isdigit() else "other"]
    return bits


def _public_sequence(text: str) -> Strength | None:
    """The guess of a de Bruijn substring: which sequence (alphabet, order, direction) and where."""
    own = "".join(sorted(set(text)))
    alphabets = [a for a in dict.fromkeys((own, *ALPHABETS)) if set(text) <= set(a)]
    tried, hit = 0, False
    for alphabet in alphabets:
        for n in range(1, 64):
            if len(alphabet) ** n > MAX_SEQUENCE:
                break
            sequence = _de_bruijn(alphabet, n)
            tried += 2 * len(sequence)  # both directions, every start
            hit = hit or text in sequence + sequence[: len(text)] or text[::-1] in sequence + sequence[: len(text)]
    return Strength(math.log2(max(tried, 2)), "a de Bruijn sequence") if hit else None


@functools.lru_cache(maxsize=64)
def _de_bruijn(alphabet: str, n: int) -> str:
    """The lexicographically least de Bruijn sequence B(len(alphabet), n) (Fredricksen-Kessler-Maiorana)."""
    k = len(alphabet)
    a, out = [0] * (k * n + 1), []

    def db(t: int, p: int) -> None:
        if t > n:
            if n % p == 0:
                out.extend(a[1: p + 1])
            return
        a[t] = a[t - p]
        db(t + 1, p)
        for j in range(a[t - p] + 1, k):
            a[t] = j
            db(t + 1, t)

    if k == 1:
        return alphabet
    db(1, 1)
    return "".join(alphabet[i] for i in out)
