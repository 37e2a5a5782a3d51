"""A program rewritten in a form that keeps what it does is the same look (fourth red team, 2026-12-05), and so is
a variant keeping nearly the same tokens, or one acting otherwise on public dev inputs only (fifth red team): the
keyed digest ``program_behaviour`` and MinHash sketch ``program_sketch`` (``arena.scoring.behaviour``,
``behaviour_sketch``) of the tokens a program keeps on the round's test contexts in its sandbox, and
``plan_looks`` counting a look by them when both events hold them. Fixed synthetic layer inputs (the arena's are
the round's first test context per task: test_arena_trust.py), the real sandbox, a real ledger."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_search_arena_claims import OWNER, _enter, _look, _origin, _plan

from cachecraft_lib.arena.scoring.behaviour import FAILED, UNSTABLE, LayerInput, behaviour_probe
from cachecraft_lib.arena.scoring.behaviour_sketch import (
    SIZE,
    THRESHOLD,
    minhash,
    parsed,
    shown,
    similarity,
    sketch_key,
)
from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.code_shape import look_digests
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.scoring.plan_looks import sketch_matches
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.sandbox import Limits

ASSETS = Path(__file__).parent / "assets" / "arena"
EXAMPLES = Path(__file__).resolve().parents[1] / "cachecraft_lib" / "arena" / "examples"
RATIOS = [0.5, 0.75]
KEY = sketch_key(b"round secret (test)", "A", 1)

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
SWAP = """        order = np.argsort(-s, axis=1, kind="stable")
        rows = np.arange(s.shape[0]){only}
        s[rows, order[:, layer.budget]] = s[rows, order[:, 0]] + 1.0  # the first evicted in, the last kept out
        return s
"""
DEV_LENGTHS = (200, 240)  # the public dev contexts' lengths; the round's test contexts are 256 and 320 long
VARIANTS = {  # BASE changed by one kept token: the fifth red team's fresh digests
    "one token on one input": BASE.replace("        return s\n", SWAP.format(
        only="[:1]\n        if layer.keys.shape[1] != 256 or layer.layer or layer.budget != 128:\n            return s")),
    "one token per head, layer, budget and context": BASE.replace("        return s\n", SWAP.format(only="")),
    "one token on the public dev inputs only": BASE.replace("        return s\n", SWAP.format(
        only=f"\n        if layer.keys.shape[1] not in {DEV_LENGTHS}:\n            return s")),
}
RECENT = '''
import numpy as np


class Method:
    def keep(self, layer):
        return np.arange(layer.keys.shape[1] - layer.budget, layer.keys.shape[1])
'''
OTHERS = {"frc": EXAMPLES / "frc", "snapkv": EXAMPLES / "baselines" / "snapkv", "tova": EXAMPLES / "baselines" / "tova",
          "streaming_llm": EXAMPLES / "baselines" / "streaming_llm", "knorm": EXAMPLES / "baselines" / "knorm",
          "wherewhat_a": EXAMPLES / "wherewhat_a"}  # genuinely different programs, with BASE and RECENT
RANDOM = '''
import numpy as np


class Method:
    def score(self, layer):  # numpy.random cannot load in the sandbox; a string's hash and an address differ per run
        return np.roll(np.linalg.norm(layer.keys, axis=-1), hash("x") % 97 + id(object()) % 89, axis=1)
'''
CRASH = "class Method:\n    def score(self, layer):\n        raise RuntimeError('boom')\n"


def _inputs(lengths: tuple[int, ...], seed: int) -> list[list[LayerInput]]:
    """Contexts of two layers: 2 KV heads, 4 query heads, head size 8 (fixed seed)."""
    rng = np.random.default_rng(seed)
    return [[LayerInput(rng.standard_normal((2, n, 8)).astype(np.float32), rng.standard_normal((2, n, 8)).astype(
        np.float32), rng.standard_normal((4, 8, 8)).astype(np.float32), np.arange(n, dtype=np.int64), layer, 2)
        for layer in range(2)] for n in lengths]


INPUTS = _inputs((256, 320), 7)  # the round's test contexts, as the arena probes them
DEV_INPUTS = _inputs(DEV_LENGTHS, 8)  # public: what the probe ran on before the fifth red team


def _sub(tmp_path: Path, code: str | None = None, src: Path = ASSETS / "good_scores"):
    folder = tmp_path / hashlib.sha256((code or str(src)).encode()).hexdigest()[:12]
    if not folder.exists():
        shutil.copytree(src, folder)
        shutil.copy(ASSETS / "good_scores" / "DESCRIPTION.md", folder / "DESCRIPTION.md")
        (folder / "metadata.yaml").write_text("name: variant\nauthor: tester\nboards: [A]\n")
        if code is not None:
            (folder / "method.py").write_text(code)
    return load_submission(folder)


_SEEN: dict[tuple, dict] = {}  # a program's digests, computed once for the module (the sandbox takes ~0.5 s)


def _probe(tmp_path: Path, code: str | None = None, src: Path = ASSETS / "good_scores", inputs: str = "test",
           key: bytes = KEY) -> dict:
    found = (code, str(src), inputs, key)
    if found not in _SEEN:
        _SEEN[found] = behaviour_probe(_sub(tmp_path, code, src), INPUTS if inputs == "test" else DEV_INPUTS, RATIOS,
                                       Limits(allow_weak=True), key)
    return _SEEN[found]


def _behaviour(tmp_path: Path, code: str | None = None, src: Path = ASSETS / "good_scores") -> str:
    return _probe(tmp_path, code, src)["program_behaviour"]


def _digests(tmp_path: Path, code: str) -> dict:
    """What ``Arena.submit`` records of a program in its look: code digests, behaviour digest and sketch."""
    return {**look_digests(code.encode()), **_probe(tmp_path, code)}


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


def test_a_one_token_variant_is_near_and_different_programs_are_far(tmp_path):
    """The threshold's margin (here: variants 0.98-1.0, other pairs at most 0.45; smoke board A's test contexts:
    0.99 and 0.78): each one-token variant (a fresh exact digest) at or above ``THRESHOLD``; every pair of
    genuinely different programs (six examples, BASE, a recency window) below it, save one pair the sketch cannot
    tell apart: a recency window and StreamingLLM (the same window less 4 sink tokens), one look by this measure."""
    base = _probe(tmp_path, BASE)
    for form, code in VARIANTS.items():
        mine = _probe(tmp_path, code)
        assert mine["program_behaviour"] != base["program_behaviour"] or form.endswith("dev inputs only"), form
        assert similarity(mine["program_sketch"], base["program_sketch"]) >= THRESHOLD, form
    programs = {name: _probe(tmp_path, src=src)["program_sketch"] for name, src in OTHERS.items()}
    programs.update(base=base["program_sketch"], recent=_probe(tmp_path, RECENT)["program_sketch"])
    pairs = {(a, b): similarity(x, y) for a, x in programs.items() for b, y in programs.items() if a < b}
    assert pairs.pop(("recent", "streaming_llm")) >= THRESHOLD  # unweighted: 4 sink tokens of 64-160 kept
    assert max(pairs.values()) < THRESHOLD - 0.3, max(pairs.items(), key=lambda p: p[1])


def test_a_program_acting_otherwise_on_the_public_dev_inputs_only_is_the_same_behaviour(tmp_path):
    """The fifth red team's first hole: on the dev inputs (the old probe's) a fresh digest and a far sketch, on
    the round's test contexts (the probe's now) the same digest and sketch as the program it varies."""
    code = VARIANTS["one token on the public dev inputs only"]
    assert _probe(tmp_path, code, inputs="dev")["program_behaviour"] != _probe(tmp_path, BASE, inputs="dev")[
        "program_behaviour"]
    assert _probe(tmp_path, code) == _probe(tmp_path, BASE)


def test_both_steps_of_the_sketch_are_keyed():
    """Which tuple is each value's minimum depends on the key (two sets' matching values fall elsewhere under
    another key), and so does how a minimum is shown: neither can be redone from public data."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2 ** 40, 4000).astype(np.uint64), rng.integers(0, 2 ** 40, 4000).astype(np.uint64)
    b[:2000] = a[:2000]  # Jaccard 1/3
    keys = [sketch_key(s, "A", 1) for s in (b"one secret", b"another secret")]
    matching = [parsed(minhash(a, k)) == parsed(minhash(b, k)) for k in keys]
    assert 0 < matching[0].sum() < SIZE and not np.array_equal(*matching)
    assert shown(12345, keys[0]) != shown(12345, keys[1])


def test_the_sketch_is_keyed_by_the_round(tmp_path):
    """Another round's secret (or board) gives unrelated values: a sketch matches nothing made without its key."""
    mine = _probe(tmp_path, BASE)
    for other in (sketch_key(b"another round secret", "A", 1), sketch_key(b"round secret (test)", "A", 2),
                  sketch_key(b"round secret (test)", "B_online", 1)):
        theirs = _probe(tmp_path, BASE, key=other)
        assert similarity(mine["program_sketch"], theirs["program_sketch"]) < 0.1
        assert mine["program_behaviour"] != theirs["program_behaviour"]


def test_failing_and_random_programs_get_the_one_digest_of_their_kind(tmp_path):
    """No fresh digest from crashing on the inputs, nor from randomness (two runs compared); no sketch either."""
    assert _probe(tmp_path, CRASH) == {"program_behaviour": FAILED}
    assert _probe(tmp_path, CRASH.replace("boom", "bang")) == {"program_behaviour": FAILED}
    assert behaviour_probe(_sub(tmp_path, RANDOM), INPUTS, RATIOS, Limits(allow_weak=True), KEY) == {
        "program_behaviour": UNSTABLE}


def _ledger(path: Path) -> Ledger:
    ledger = Ledger(path)
    ledger.append("round", {"round": 1, "commitment": "c0ffee" * 10, "salt": "s"})
    return ledger


def _entry(ledger: Ledger, code: str, digests: dict) -> dict:
    plan = _plan(ledger)
    return _enter(ledger, OWNER, hashlib.sha256(code.encode()).hexdigest(), _origin(plan), **digests)


@pytest.mark.parametrize("form", ["dead pass", "x + 0", "helper inlined", "getattr"])
def test_a_look_at_a_behaviourally_equal_program_counts_against_the_claim(tmp_path, form):
    code = REWRITES[form]
    earlier, later = _digests(tmp_path, BASE), _digests(tmp_path, code)
    assert earlier["program_shape"] != later["program_shape"]
    ledger = _ledger(tmp_path / "ledger.jsonl")
    _look(ledger, "bob-alt", hashlib.sha256(BASE.encode()).hexdigest(), **earlier)  # a peek under a throwaway name
    entry = _entry(ledger, code, later)
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2 and "one per seed" in verdict.reason

    other = _ledger(tmp_path / "other" / "ledger.jsonl")  # a peek at a program that keeps other tokens: not its look
    _look(other, "bob-alt", hashlib.sha256(RECENT.encode()).hexdigest(), **_digests(tmp_path, RECENT))
    entry = _entry(other, code, later)
    assert claim_verdict(other.events(), entry).holds


@pytest.mark.parametrize("form", list(VARIANTS))
def test_a_look_at_a_near_variant_counts_against_the_claim(tmp_path, form):
    """A peek at a one-token variant (its own exact digests: only the sketch is near), then the program entered
    under the plan: two looks, the claim fails."""
    peek, mine = _digests(tmp_path, VARIANTS[form]), _digests(tmp_path, BASE)
    assert peek["program_behaviour"] != mine["program_behaviour"] or form.endswith("dev inputs only")
    ledger = _ledger(tmp_path / "ledger.jsonl")
    _look(ledger, "bob-alt", hashlib.sha256(VARIANTS[form].encode()).hexdigest(), **peek)
    entry = _entry(ledger, BASE, mine)
    verdict = claim_verdict(ledger.events(), entry)
    assert not verdict.holds and verdict.looks == 2 and "one per seed" in verdict.reason


def test_sketches_are_compared_only_on_one_board_and_round(tmp_path):
    """An entry's sketches (its own and its looks', each of the board and round it was made on) meet a look's only
    where both are of one board and round: another's key makes other values, and equal values there mean nothing."""
    mine = _probe(tmp_path, BASE)["program_sketch"]
    look = {"board": "A", "round": 1, "program_sketch": mine}
    assert sketch_matches([("A", 1, mine)], look)
    assert not sketch_matches([("B_online", 1, mine), ("A", 2, mine)], look)
    assert not sketch_matches([("A", 1, mine)], {"board": "A", "round": 1, "program_sketch": mine[:-8] + "zz" * 4})


def test_an_entrys_own_behaviour_digest_and_sketch_are_matched_too(tmp_path):
    """An entry body's ``code_behaviour`` and ``code_sketch`` (``Arena.submit`` records them) match a look's."""
    base, near = _probe(tmp_path, BASE), _probe(tmp_path, VARIANTS["one token on one input"])
    for peek, body in (({"program_behaviour": base["program_behaviour"]}, {"code_behaviour": base["program_behaviour"]}),
                       ({"program_sketch": near["program_sketch"]}, {"code_sketch": base["program_sketch"]})):
        ledger = _ledger(tmp_path / hashlib.sha256(str(body).encode()).hexdigest()[:8] / "ledger.jsonl")
        _look(ledger, "bob-alt", "H_peek", **peek)
        origin = _origin(_plan(ledger))
        _look(ledger, OWNER, "H_entry", origin)
        entry = ledger.append("submission", {"board": "A", "name": "H_entry", "author": OWNER,
                                             "code_sha256": "H_entry", "round": 1, "origin": origin, **body})
        assert claim_verdict(ledger.events(), entry).looks == 2, body


def test_an_old_ledger_without_the_fields_verifies_as_before(tmp_path):
    """Looks recorded before looks held a behaviour digest or sketch are compared on the fields both hold: the
    peek at another form of the program (another shape, neither field) is not matched, as before."""
    code = REWRITES["x + 0"]
    old = _ledger(tmp_path / "ledger.jsonl")
    _look(old, "bob-alt", hashlib.sha256(BASE.encode()).hexdigest(), **look_digests(BASE.encode()))
    entry = _entry(old, code, _digests(tmp_path, code))
    verdict = claim_verdict(old.events(), entry)
    assert verdict.holds and verdict.looks == 1


def test_a_harness_failure_gives_no_digest_rather_than_one_every_program_shares(tmp_path):
    """The inputs' prefill failing is the harness's fault: no digest (a warning), never ``FAILED``."""
    def broken():
        raise RuntimeError("the prefill ran out of memory")
        yield  # a generator, like ``ProbeInputs``

    with pytest.warns(UserWarning, match="not computed"):
        assert behaviour_probe(_sub(tmp_path, BASE), broken(), RATIOS, Limits(allow_weak=True), KEY) == {}
