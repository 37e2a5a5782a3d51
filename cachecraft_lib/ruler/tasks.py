"""The 13 RULER task generators.

Each generator builds RULER's full ``input`` (answer prefix included) for a haystack of ``n``
units and returns it with the list of reference answers; ``dataset.generate`` fits ``n`` to the
token budget and applies KVPress's split. Offline substitutes (synthetic essay prose and the
synthetic document-QA tasks) are listed in ``SUBSTITUTES``.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from . import templates as T
from .documents import QA1_QUESTIONS, entity, entity_doc, invented_name, person_doc
from .words import cwe_words, random_key_word, split_sentences, synthetic_essay_words

DEPTHS = [round(100 * i / 39) for i in range(40)]  # RULER's 40 quantised needle depths, 0..100

SUBSTITUTES = {
    "niah_single_2": "essay haystack -> synthetic prose",
    "niah_single_3": "essay haystack -> synthetic prose",
    "niah_multikey_1": "essay haystack -> synthetic prose",
    "niah_multivalue": "essay haystack -> synthetic prose",
    "niah_multiquery": "essay haystack -> synthetic prose",
    "qa_1": "SQuAD -> synthetic single-document QA",
    "qa_2": "HotpotQA -> synthetic two-hop document QA",
}


@dataclass(frozen=True)
class NiahConfig:
    haystack: str  # noise | essay | needle
    type_k: str  # words | numbers | uuids
    type_v: str  # numbers | uuids
    num_k: int = 1
    num_v: int = 1
    num_q: int = 1


NIAH = {
    "niah_single_1": NiahConfig("noise", "words", "numbers"),
    "niah_single_2": NiahConfig("essay", "words", "numbers"),
    "niah_single_3": NiahConfig("essay", "words", "uuids"),
    "niah_multikey_1": NiahConfig("essay", "words", "numbers", num_k=4),
    "niah_multikey_2": NiahConfig("needle", "words", "numbers"),
    "niah_multikey_3": NiahConfig("needle", "uuids", "uuids"),
    "niah_multivalue": NiahConfig("essay", "words", "numbers", num_v=4),
    "niah_multiquery": NiahConfig("essay", "words", "numbers", num_k=4, num_q=4),
}


@dataclass
class TaskState:
    """What a task keeps across the samples of one (length, seed): fixed examples and permutations."""

    length: int
    seed: int
    extras: dict = field(default_factory=dict)


Generator = Callable[[int, random.Random, TaskState], tuple[str, list[str]]]


# ----------------------------------------------------------------------------------------- NIAH
def _needle_value(kind: str, rng: random.Random) -> str:
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if kind == "words":
        return random_key_word(rng)
    raise ValueError(f"unknown needle type {kind!r}")


def _niah(cfg: NiahConfig) -> Generator:
    num_k = max(cfg.num_k, cfg.num_q)

    def build(n: int, rng: random.Random, state: TaskState) -> tuple[str, list[str]]:
        keys: list[str] = []
        values: list[list[str]] = []
        needles: list[str] = []
        for _ in range(num_k):
            key = _needle_value(cfg.type_k, rng)
            while key in keys:
                key = _needle_value(cfg.type_k, rng)
            keys.append(key)
            values.append([_needle_value(cfg.type_v, rng) for _ in range(cfg.num_v)])
            needles += [T.fill(T.NIAH_NEEDLE, type_needle_v=cfg.type_v, key=key, value=v) for v in values[-1]]
        random.Random(state.seed).shuffle(needles)  # RULER: a fixed permutation for a given count

        if cfg.haystack == "essay":
            sents = split_sentences(" ".join(synthetic_essay_words(n)))
            depths = sorted(int(len(sents) * d / 100) for d in rng.sample(DEPTHS, len(needles)))
            cuts = [0, *depths, len(sents)]
            pieces: list[str] = []
            for i in range(len(cuts) - 1):
                pieces += sents[cuts[i] : cuts[i + 1]]
                if i < len(needles):
                    pieces.append(needles[i])
            context = " ".join(pieces)
        else:
            if cfg.haystack == "noise":
                lines = [T.NOISE_SENTENCE] * n
            else:  # "needle": every line is a distractor needle with a fresh key (never a queried key)
                lines = []
                for _ in range(n):
                    key = _needle_value(cfg.type_k, rng)
                    while key in keys:
                        key = _needle_value(cfg.type_k, rng)
                    lines.append(T.fill(T.NIAH_NEEDLE, type_needle_v=cfg.type_v, key=key,
                                        value=_needle_value(cfg.type_v, rng)))
            for index, needle in zip(sorted(rng.sample(range(max(n, 1)), len(needles)), reverse=True),
                                     needles, strict=False):
                lines.insert(index, needle)
            context = "\n".join(lines)

        indices = rng.sample(range(num_k), cfg.num_q)
        queries = [keys[i] for i in indices]
        answers = [a for i in indices for a in values[i]]
        query = queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
        singular = cfg.num_q * cfg.num_v == 1
        template = T.niah_number(T.NIAH_TEMPLATE + T.NIAH_PREFIX, singular)
        type_v = cfg.type_v[:-1] if singular else cfg.type_v
        return T.fill(template, type_needle_v=type_v, context=context, query=query), answers

    return build


# ------------------------------------------------------------------------------------------ VT
def _vt_chain(n_noise: int, rng: random.Random, var_len: int, num_hops: int = 4) -> tuple[str, int, list[str]]:
    names: list[str] = []
    while len(names) < num_hops + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=var_len))
        if name not in names:
            names.append(name)
    value = rng.randint(10000, 99999)
    chain = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(num_hops)]
    sentences = [T.NOISE_SENTENCE + "\n"] * n_noise
    for j, pos in enumerate(sorted(rng.sample(range(max(n_noise, len(chain))), len(chain)))):
        sentences.insert(pos + j, chain[j])
    context = " ".join(sentences).replace(". \n", ".\n")
    return context, value, names


def vt_icl_example(state: TaskState) -> str:
    """RULER's one-shot vt example: generated once per dataset (3-letter names, about 500 tokens).

    As in RULER, its whitespace is collapsed and the question's last word is dropped.
    """
    rng = random.Random(state.seed - 1)
    context, value, names = _vt_chain(12, rng, var_len=3)
    question = T.fill(T.VT_TEMPLATE, context=context, query=value)
    question = " ".join(question.split()[:-1])
    prefix = " ".join(T.fill(T.VT_PREFIX, num_v=len(names), query=value).split())
    return f" {question} {prefix} {' '.join(names)}\n\n\n\n"


def _vt(n: int, rng: random.Random, state: TaskState) -> tuple[str, list[str]]:
    if "icl" not in state.extras:
        state.extras["icl"] = vt_icl_example(state)
    context, value, names = _vt_chain(n, rng, var_len=5)
    main = T.fill(T.VT_TEMPLATE + T.VT_PREFIX, context=context, query=value, num_v=len(names))
    return state.extras["icl"] + main, names


# ----------------------------------------------------------------------------------------- CWE
def _cwe_list(num_words: int, common_repeats: int, uncommon_repeats: int, rng: random.Random,
              seed: int) -> tuple[str, list[str]]:
    full = rng.sample(cwe_words(seed), num_words)
    common, uncommon = full[:10], full[10:]
    words = common * common_repeats + uncommon * uncommon_repeats
    random.Random(seed).shuffle(words)
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words)), common


def _cwe(n: int, rng: random.Random, state: TaskState) -> tuple[str, list[str]]:
    big = state.length >= 4096
    if "icl" not in state.extras:
        ex_ctx, ex_ans = _cwe_list(40 if big else 20, 10 if big else 3, 3 if big else 1,
                                   random.Random(state.seed - 1), state.seed)
        state.extras["icl"] = (T.fill(T.CWE_TEMPLATE + T.CWE_PREFIX, context=ex_ctx)
                               + " ".join(f"{i + 1}. {w}" for i, w in enumerate(ex_ans)) + "\n")
    ctx, answers = _cwe_list(max(n, 11), 30 if big else 6, 3 if big else 1, rng, state.seed)
    return state.extras["icl"] + T.fill(T.CWE_TEMPLATE + T.CWE_PREFIX, context=ctx), answers


# ----------------------------------------------------------------------------------------- FWE
def zeta(alpha: float, terms: int = 1000) -> float:
    """Riemann zeta for alpha > 1 (Euler-Maclaurin tail); avoids a SciPy dependency."""
    partial = sum(k ** -alpha for k in range(1, terms))
    n = float(terms)
    return partial + n ** (1 - alpha) / (alpha - 1) + 0.5 * n ** -alpha + alpha * n ** (-alpha - 1) / 12


def _fwe_vocab(rng: random.Random, size: int, seed: int) -> list[str]:
    """A fresh random 6-letter vocabulary per sample, in RULER's fixed shuffled order; rank 1 is '...'."""
    vocab: set[str] = set()
    while len(vocab) < size:
        vocab.add("".join(rng.choices(string.ascii_lowercase, k=6)))
    ordered = sorted(vocab)
    random.Random(seed).shuffle(ordered)
    ordered[0] = "..."
    return ordered


def _fwe(n: int, rng: random.Random, state: TaskState, alpha: float = 2.0) -> tuple[str, list[str]]:
    vocab = _fwe_vocab(rng, max(state.length // 50, 5), state.seed)
    words: list[str] = []
    for word, count in zip(vocab, fwe_counts(n, len(vocab), alpha), strict=True):
        words += [word] * count
    random.Random(state.seed).shuffle(words)
    return T.fill(T.FWE_TEMPLATE + T.FWE_PREFIX, context=" ".join(words), query=""), vocab[1:4]


# ------------------------------------------------------------------------------ QA substitutes
def _qa_docs(gold: list[str], n_docs: int, seed: int, distractor: Callable[[], str]) -> str:
    docs = list(gold) + [distractor() for _ in range(max(n_docs - len(gold), 0))]
    random.Random(seed).shuffle(docs)  # RULER: fixed permutation, so the gold slot depends on n_docs only
    return "\n\n".join(T.fill(T.QA_DOCUMENT, i=i + 1, document=d) for i, d in enumerate(docs))


def _qa_1(n: int, rng: random.Random, state: TaskState) -> tuple[str, list[str]]:
    gold = entity(rng)
    field_name, question = rng.choice(QA1_QUESTIONS)
    context = _qa_docs([entity_doc(gold)], n, state.seed, lambda: entity_doc(entity(rng)))
    return T.fill(T.QA_TEMPLATE + T.QA_PREFIX, context=context, query=question.format(**gold)), [gold[field_name]]


def _qa_2(n: int, rng: random.Random, state: TaskState) -> tuple[str, list[str]]:
    gold = entity(rng)
    birth_city = invented_name(rng, 2)
    gold_docs = [entity_doc(gold), person_doc(gold["founder"], birth_city, str(int(gold["year"]) - 35), rng)]

    def distractor() -> str:
        e = entity(rng)
        return entity_doc(e) if rng.random() < 0.5 else person_doc(e["founder"], invented_name(rng, 2), e["year"], rng)

    context = _qa_docs(gold_docs, n, state.seed, distractor)
    question = f"In which city was the person who established the {gold['name']} born?"
    return T.fill(T.QA_TEMPLATE + T.QA_PREFIX, context=context, query=question), [birth_city]


# ---------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class TaskSpec:
    """How to build and size one task: the generator, its haystack unit and search step."""

    build: Generator
    unit: str
    step: Callable[[int], int]


GENERATORS: dict[str, TaskSpec] = {
    **{name: TaskSpec(_niah(cfg), "words" if cfg.haystack == "essay" else "lines",
                      (lambda L: 500) if cfg.haystack == "essay" else (lambda L: 25 if L >= 4096 else 5))
       for name, cfg in NIAH.items()},
    "vt": TaskSpec(_vt, "noise lines", lambda L: 10),
    "cwe": TaskSpec(_cwe, "words", lambda L: 10),
    "fwe": TaskSpec(_fwe, "words", lambda L: max(L // 32, 1)),
    "qa_1": TaskSpec(_qa_1, "documents", lambda L: 10),
    "qa_2": TaskSpec(_qa_2, "documents", lambda L: 10),
}


def fwe_counts(n: int, vocab_size: int, alpha: float = 2.0) -> list[int]:
    """Word counts per rank for a fwe context of ``n`` words (used by tests and notebooks)."""
    z = zeta(alpha)
    return [int(n * k ** -alpha / z) for k in range(1, vocab_size + 1)]

