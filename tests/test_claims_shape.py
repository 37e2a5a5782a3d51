"""A program re-entered with its names renamed is the same look (second red team, 2026-12-05): ``code_shape``'s
names-free digest, and ``plan_looks`` counting a look by it when both events hold it. No model, a real ledger."""

from __future__ import annotations

import hashlib

from test_search_arena_claims import OWNER, _enter, _look, _origin, _plan

from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.code_shape import code_digest, look_digests, shape_digest
from cachecraft_lib.arena.scoring.ledger import Ledger

PROGRAM = '''
import numpy as np
from cachecraft_lib.policy import maxabs, topk_tokens

WEIGHTS = (0.5, 0.5)


def blend(ctx, names, scale=1.0):
    total = np.zeros(ctx.L, dtype=np.float32)
    for name, weight in zip(names, WEIGHTS, strict=True):
        total = total + scale * weight * maxabs(ctx[name])
    return total


class Method:
    def __init__(self):
        self.memory = None

    def helper(self, values):
        try:
            kept = [v for v in values if v > 0]
        except TypeError as err:
            kept = [str(err)]
        return kept

    def score(self, ctx):
        self.memory = blend(ctx, ("key_norm", "sink_mask"), scale=2.0)
        squash = lambda x: x / (1 + abs(x))  # noqa: E731
        return np.convolve(squash(self.memory), np.ones(3), mode="same")


def select_tokens_to_keep(scores, ctx):
    return topk_tokens(scores, ctx)
'''

RENAMED = '''
import numpy
from cachecraft_lib.policy import maxabs as m_abs, topk_tokens

W = (0.5, 0.5)


def mix(c, features, k=1.0):
    acc = numpy.zeros(c.L, dtype=numpy.float32)
    for f, w in zip(features, W, strict=True):
        acc = acc + k * w * m_abs(c[f])
    return acc


class Method:
    def __init__(self):
        self.state = None

    def positives(self, xs):
        try:
            out = [q for q in xs if q > 0]
        except TypeError as e:
            out = [str(e)]
        return out

    def score(self, c):
        self.state = mix(c, ("key_norm", "sink_mask"), k=2.0)
        s = lambda t: t / (1 + abs(t))  # noqa: E731
        return numpy.convolve(s(self.state), numpy.ones(3), mode="same")


def select_tokens_to_keep(z, cc):  # ctx renamed otherwise than in the functions above
    return topk_tokens(z, cc)
'''


def test_a_consistently_renamed_program_has_the_same_shape_and_another_ast():
    original, renamed = PROGRAM.encode(), RENAMED.encode()
    assert code_digest(original) != code_digest(renamed)  # the red team's evasion of program_ast
    assert shape_digest(original) == shape_digest(renamed)
    assert look_digests(renamed) == {"program_ast": code_digest(renamed), "program_shape": shape_digest(renamed)}
    assert shape_digest(b"def (") is None and look_digests(b"def (") == {}


def test_programs_that_differ_in_what_they_do_have_other_shapes():
    """What comes from outside is kept: another library call, another keyword of it, another constant, another
    order of the program's own names, an attribute only read."""
    base = shape_digest(PROGRAM.encode())
    for old, new in [("np.convolve", "np.correlate"), ('mode="same"', 'mode="valid"'), ("(0.5, 0.5)", "(0.4, 0.6)"),
                     ("return topk_tokens(scores, ctx)", "return topk_tokens(ctx, scores)"), ("ctx.L", "ctx.T"),
                     ("from cachecraft_lib.policy import maxabs", "from cachecraft_lib.policy import minabs"),
                     ("scale * weight", "weight * weight")]:
        assert old in PROGRAM
        assert shape_digest(PROGRAM.replace(old, new).encode()) != base, (old, new)


def _shape_look(ledger: Ledger, author: str, code: str, origin: dict | None = None, **more) -> dict:
    sha = hashlib.sha256(code.encode()).hexdigest()
    return _look(ledger, author, sha, origin, **look_digests(code.encode()), **more)


def test_a_look_at_the_program_under_other_names_before_the_plan_counts_against_its_claim(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _shape_look(ledger, "bob-alt", PROGRAM)  # an exploratory peek under a throwaway name
    plan = _plan(ledger)
    sha = hashlib.sha256(RENAMED.encode()).hexdigest()
    entry = _enter(ledger, OWNER, sha, _origin(plan), **look_digests(RENAMED.encode()))
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2 and "one per seed" in verdict.reason

    old = Ledger(tmp_path / "old" / "ledger.jsonl")  # a look recorded before looks held a shape: not matched by it
    old.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(old, "bob-alt", hashlib.sha256(PROGRAM.encode()).hexdigest(), program_ast=code_digest(PROGRAM.encode()))
    entry = _enter(old, OWNER, sha, _origin(_plan(old)), **look_digests(RENAMED.encode()))
    assert claim_verdict(old.events(), entry).holds  # compared on the fields both hold: SHA-256 and program_ast


def test_a_seed_program_with_its_names_renamed_is_the_same_family(tmp_path):
    from cachecraft_lib.search.seeds import seed_path

    source = seed_path("v1").read_text()
    renamed = source.replace("FEATURES", "SIGNALS").replace("weight", "w")
    assert code_digest(renamed.encode()) != code_digest(source.encode())
    ledger = Ledger(tmp_path / "ledger.jsonl")
    first = _plan(ledger)
    _enter(ledger, OWNER, "H_first", _origin(first))
    again = _plan(ledger, seed_source=renamed)
    assert again["payload"]["seed_shape"] == first["payload"]["seed_shape"]
    entry = _enter(ledger, OWNER, "H_second", _origin(again))
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and "same family" in verdict.reason
