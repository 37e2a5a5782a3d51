"""A program rewritten in a form that keeps what it does is the same look (fourth red team, 2026-12-05): the
behavioural digest ``program_behaviour`` (``arena.scoring.behaviour``), the tokens a program keeps on fixed
inputs in its sandbox, and ``plan_looks`` counting a look by it when both events hold it. Fixed synthetic layer
inputs (the arena's are its board's dev contexts: test_arena_trust.py), the real sandbox, a real ledger."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_search_arena_claims import OWNER, _enter, _look, _origin, _plan

from cachecraft_lib.arena.scoring.behaviour import FAILED, UNSTABLE, LayerInput, behaviour_digest
from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.code_shape import look_digests
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.sandbox import Limits

ASSETS = Path(__file__).parent / "assets" / "arena"
EXAMPLES = Path(__file__).resolve().parents[1] / "cachecraft_lib" / "arena" / "examples"
RATIOS = [0.5, 0.75]

BASE = '''
import numpy as np


def norms(keys):
    return np.linalg.norm(keys, axis=-1)


class Method:
    def score(self, layer):
        s = norms(layer.keys)
        s[:, -8:] += 100.0
        return s
'''
REWRITES = {  # the red team's forms: each keeps what BASE does, each has another program_shape
    "dead pass": BASE.replace("        s = norms", "        pass\n        s = norms"),
    "x + 0": BASE.replace("return s\n", "return s + 0\n"),
    "helper inlined": BASE.replace("s = norms(layer.keys)", "s = np.linalg.norm(layer.keys, axis=-1)"),
    "getattr": BASE.replace("np.linalg.norm(keys", "getattr(np.linalg, 'norm')(keys"),
    "slice unrolled": BASE.replace("        s[:, -8:] += 100.0\n", "".join(
        f"        s[:, -{i}] += 100.0\n" for i in range(1, 9))),
    "scores doubled": BASE.replace("return s\n", "return 2 * s\n"),  # the same ranks: the same tokens kept
}
RECENT = '''
import numpy as np


class Method:
    def keep(self, layer):
        return np.arange(layer.keys.shape[1] - layer.budget, layer.keys.shape[1])
'''
RANDOM = '''
import numpy as np


class Method:
    def score(self, layer):  # numpy.random cannot load in the sandbox; a string's hash and an address differ per run
        return np.roll(np.linalg.norm(layer.keys, axis=-1), hash("x") % 97 + id(object()) % 89, axis=1)
'''
CRASH = "class Method:\n    def score(self, layer):\n        raise RuntimeError('boom')\n"


def _inputs() -> list[list[LayerInput]]:
    """Two contexts of two layers: 2 KV heads, 4 query heads, 48 and 64 tokens (fixed seed)."""
    rng = np.random.default_rng(7)
    return [[LayerInput(rng.standard_normal((2, n, 8)).astype(np.float32), rng.standard_normal((2, n, 8)).astype(
        np.float32), rng.standard_normal((4, 8, 8)).astype(np.float32), np.arange(n, dtype=np.int64), layer, 2)
        for layer in range(2)] for n in (48, 64)]


INPUTS = _inputs()


def _sub(tmp_path: Path, code: str | None = None, src: Path = ASSETS / "good_scores"):
    folder = tmp_path / hashlib.sha256((code or str(src)).encode()).hexdigest()[:12]
    if not folder.exists():
        shutil.copytree(src, folder)
        shutil.copy(ASSETS / "good_scores" / "DESCRIPTION.md", folder / "DESCRIPTION.md")
        (folder / "metadata.yaml").write_text("name: variant\nauthor: tester\nboards: [A]\n")
        if code is not None:
            (folder / "method.py").write_text(code)
    return load_submission(folder)


_SEEN: dict[tuple, str] = {}  # a program's digest, computed once for the module (the sandbox takes ~0.5 s)


def _behaviour(tmp_path: Path, code: str | None = None, src: Path = ASSETS / "good_scores") -> str:
    key = (code, str(src))
    if key not in _SEEN:
        _SEEN[key] = behaviour_digest(_sub(tmp_path, code, src), INPUTS, RATIOS, Limits(allow_weak=True))
    return _SEEN[key]


def test_rewrites_that_keep_what_the_program_does_have_one_behaviour_and_other_shapes(tmp_path):
    base = _behaviour(tmp_path, BASE)
    assert base not in (FAILED, UNSTABLE)
    for form, code in REWRITES.items():
        assert code != BASE, form
        assert look_digests(code.encode())["program_shape"] != look_digests(BASE.encode())["program_shape"], form
        assert _behaviour(tmp_path, code) == base, form


def test_programs_that_keep_other_tokens_have_other_behaviours(tmp_path):
    """FRC's example, a recency window (keep), BASE and BASE with another window: four digests."""
    found = {_behaviour(tmp_path, src=EXAMPLES / "frc"), _behaviour(tmp_path, RECENT), _behaviour(tmp_path, BASE),
             _behaviour(tmp_path, BASE.replace("-8:", "-4:"))}
    assert len(found) == 4 and not found & {FAILED, UNSTABLE}


def test_failing_and_random_programs_get_the_one_digest_of_their_kind(tmp_path):
    """No fresh digest from crashing on the public inputs, nor from randomness (two runs compared)."""
    assert _behaviour(tmp_path, CRASH) == FAILED
    assert _behaviour(tmp_path, CRASH.replace("boom", "bang")) == FAILED
    assert behaviour_digest(_sub(tmp_path, RANDOM), INPUTS, RATIOS, Limits(allow_weak=True)) == UNSTABLE


def _entry(ledger: Ledger, code: str, digests: dict) -> dict:
    plan = _plan(ledger)
    return _enter(ledger, OWNER, hashlib.sha256(code.encode()).hexdigest(), _origin(plan), **digests)


@pytest.mark.parametrize("form", ["dead pass", "x + 0", "helper inlined", "getattr"])
def test_a_look_at_a_behaviourally_equal_program_counts_against_the_claim(tmp_path, form):
    code = REWRITES[form]
    earlier = {**look_digests(BASE.encode()), "program_behaviour": _behaviour(tmp_path, BASE)}
    later = {**look_digests(code.encode()), "program_behaviour": _behaviour(tmp_path, code)}
    assert earlier["program_shape"] != later["program_shape"]
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(ledger, "bob-alt", hashlib.sha256(BASE.encode()).hexdigest(), **earlier)  # a peek under a throwaway name
    entry = _entry(ledger, code, later)
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2 and "one per seed" in verdict.reason

    other = Ledger(tmp_path / "other" / "ledger.jsonl")  # a peek at a program that keeps other tokens: not its look
    other.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(other, "bob-alt", hashlib.sha256(RECENT.encode()).hexdigest(),
          **{**look_digests(RECENT.encode()), "program_behaviour": _behaviour(tmp_path, RECENT)})
    entry = _entry(other, code, later)
    assert claim_verdict(other.events(), entry).holds


def test_an_entrys_own_behaviour_digest_is_matched_too(tmp_path):
    """An entry body's ``code_behaviour`` (``Arena.submit`` records it) matches a look's ``program_behaviour``."""
    behaviour = _behaviour(tmp_path, BASE)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(ledger, "bob-alt", "H_peek", program_behaviour=behaviour)
    plan = _plan(ledger)
    origin = _origin(plan)
    _look(ledger, OWNER, "H_entry", origin)
    entry = ledger.append("submission", {"board": "A", "name": "H_entry", "author": OWNER, "code_sha256": "H_entry",
                                         "round": 1, "origin": origin, "code_behaviour": behaviour})
    assert claim_verdict(ledger.events(), entry).looks == 2


def test_an_old_ledger_without_the_field_verifies_as_before(tmp_path):
    """Looks recorded before looks held a behaviour digest are compared on the fields both hold: the peek at
    another form of the program (another shape, no behaviour digest) is not matched, as before."""
    code = REWRITES["x + 0"]
    old = Ledger(tmp_path / "ledger.jsonl")
    old.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    _look(old, "bob-alt", hashlib.sha256(BASE.encode()).hexdigest(), **look_digests(BASE.encode()))
    entry = _entry(old, code, {**look_digests(code.encode()), "program_behaviour": "b" * 64})
    verdict = claim_verdict(old.events(), entry)
    assert verdict.holds and verdict.looks == 1


def test_a_harness_failure_gives_no_digest_rather_than_one_every_program_shares(tmp_path):
    """The dev inputs' prefill failing is the harness's fault: no digest (a warning), never ``FAILED``."""
    def broken():
        raise RuntimeError("the prefill ran out of memory")
        yield  # a generator, like ``ProbeInputs``

    with pytest.warns(UserWarning, match="not computed"):
        assert behaviour_digest(_sub(tmp_path, BASE), broken(), RATIOS, Limits(allow_weak=True)) is None
