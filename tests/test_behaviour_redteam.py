"""The sixth red team's findings against ``program_behaviour``/``program_sketch`` (2026-12-05), each pinned: a
``keep()`` program naming decoy indices while its ``Rewrite`` writes the original's kept rows over them is the
original (the probe codes what the cache holds, by content); the probe keeps what the press keeps (``torch.topk``'s
ties, AdaKV's ``alpha_safeguard``); a ``FAILED``/``UNSTABLE`` probe followed by a scoring run is refused
(``behaviour.mismatch``; the arena end of it: test_arena_trust.py). Synthetic inputs, the real sandbox."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_behaviour_digest import BASE, _probe
from test_search_arena_claims import OWNER, _enter, _look, _origin, _plan

from cachecraft_lib.arena.scoring.behaviour import FAILED, UNSTABLE, mismatch, probe_items
from cachecraft_lib.arena.scoring.behaviour_sketch import (
    SIZE,
    THRESHOLD,
    kept_codes,
    minhash,
    similarity,
    sketch_key,
)
from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.ledger import Ledger

KEEP = '''
import numpy as np
from method_api import Rewrite


class Method:
    def keep(self, layer):
        s = np.linalg.norm(layer.keys, axis=-1)
        s[:, -8:] += 100.0
        n, L = layer.budget, s.shape[1]
        order = np.argsort(-s, axis=1, kind="stable")
        real = order[:, :n]  # what BASE keeps
        decoy = np.roll(order, 3, axis=1)[:, L - n:]  # what the answer names: mostly the lowest ranks
        h = np.arange(s.shape[0])[:, None]
        return Rewrite(decoy, keys=SCALE * layer.keys[h, real].astype(np.float32),
                       values=layer.values[h, real].astype(np.float32))
'''
DISGUISE = KEEP.replace("SCALE * ", "")  # the cache holds exactly BASE's (key, value) rows
REWRITTEN = KEEP.replace("SCALE", "np.float32(0.5)")  # the same slots, other content: another program


def test_a_rewrite_writing_the_originals_rows_over_decoys_is_the_original(tmp_path):
    """The disguise sketched at about 0.15 before the fix (it coded the decoy indices); now the cache's content
    maps back to BASE's tokens: the same exact digest. New content stays new (the control)."""
    base, disguise, other = (_probe(tmp_path, code) for code in (BASE, DISGUISE, REWRITTEN))
    assert disguise["program_behaviour"] == base["program_behaviour"]
    assert similarity(disguise["program_sketch"], base["program_sketch"]) == 1.0
    assert similarity(other["program_sketch"], base["program_sketch"]) < THRESHOLD


def _kept(scores: np.ndarray, budget: int, allocation: str) -> set[tuple[int, int]]:
    """The (head, token) pairs the probe codes for a ``score`` answer (``kept_codes``, one layer)."""
    heads, tokens = scores.shape
    codes = kept_codes(SimpleNamespace(returns="scores", allocation=allocation), {"out": scores}, (heads, tokens, 8),
                       budget, (0, 0, 0))
    return set(zip(((codes >> np.uint64(26)) & np.uint64(0x3FF)).tolist(),
                   (codes & np.uint64((1 << 26) - 1)).tolist(), strict=True))


def _adakv(scores: np.ndarray, ratio: float) -> set[tuple[int, int]]:
    """What kvpress's ``AdaKVPress`` (the arena's head-adaptive press) keeps of these scores, run as the arena runs it."""
    from kvpress import AdaKVPress, ScorerPress

    class Fixed(ScorerPress):
        def score(self, *args):
            return torch.from_numpy(scores)[None].clone()

    heads, tokens = scores.shape
    module = SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa"))
    AdaKVPress(Fixed(compression_ratio=ratio)).compress(module, None, None, None, None, {})
    kept = np.ones((heads, tokens), bool)
    kept[module.masked_key_indices[1].numpy(), module.masked_key_indices[2].numpy()] = False
    return set(zip(*(a.tolist() for a in np.nonzero(kept)), strict=True))


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.6])
def test_the_probe_keeps_what_the_press_keeps(ratio):
    """Integer votes (many ties): the probe's set is ``scores.topk``'s, not a stable argsort's (0 of 300 tied
    tokens agreed); heads of very different scale under AdaKV: the probe's set is the press's, safeguard included
    (the probe's Jaccard to it was 0.84-0.95)."""
    from kvpress.utils import compute_n_kept

    rng = np.random.default_rng(3)
    votes = rng.integers(0, 4, (4, 600)).astype(np.float32)
    n = compute_n_kept(600, ratio)
    top = torch.from_numpy(votes)[None].topk(n, dim=-1).indices[0]
    assert _kept(votes, n, "uniform") == {(h, int(t)) for h in range(4) for t in top[h]}
    scaled = (rng.standard_normal((8, 1024)) * np.geomspace(0.05, 5, 8)[:, None]
              + np.geomspace(0.1, 10, 8)[:, None]).astype(np.float32)
    assert _kept(scaled, compute_n_kept(1024, ratio), "head_adaptive") == _adakv(scaled, ratio)


def test_a_failed_or_unstable_probe_is_no_free_pass():
    """``Arena.submit`` refuses a run that scores after a ``FAILED``/``UNSTABLE`` probe (f5: a program raising
    only before an instant); a seen program, or none probed, is not refused by this."""
    for marker in (FAILED, UNSTABLE):
        refused = mismatch({"program_behaviour": marker})
        assert refused is not None and refused.kind == "behaviour_mismatch" and "probe contexts" in str(refused)
    assert mismatch({"program_behaviour": "ab" * 32, "program_sketch": "00" * 512}) is None and mismatch({}) is None


def test_a_claim_shows_the_looks_on_its_board_and_round_that_carry_no_behaviour(tmp_path):
    """Open (e2e_optout): a dummy ``probes:`` or ``whole_cache`` leaves a look without a behaviour, so a copy of the
    program behind it is matched by its code digests only; the verdict counts such looks instead of passing
    silently (looks with a sketch, the entry's own and baselines' are not counted)."""
    sketch = _probe(tmp_path, BASE)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    plan = _plan(ledger)
    _look(ledger, "baseline", "baseline:snapkv")
    _look(ledger, "mallory", "H_optout", program_shape="S_optout")  # no behaviour: opted out
    _look(ledger, "mallory", "H_other", program_shape="S_other", program_behaviour=FAILED)
    _look(ledger, "bob", "H_seen", program_shape="S_seen", program_behaviour="ab" * 32,
          program_sketch="00" * 4 * SIZE)
    entry = _enter(ledger, OWNER, "H_base", _origin(plan), program_shape="S_base", **sketch)
    verdict = claim_verdict(ledger.events(), entry)
    assert verdict.holds and verdict.unsketched_looks == 2
    assert "2 other look(s) on board A, round 1 before the entry carry no behaviour sketch" in verdict.reason


def test_the_sketch_has_512_values_and_still_reads_the_older_128():
    """Noise at the threshold (f7: honest pairs at 0.83-0.84 beside 0.9, standard error 0.027 with 128 values):
    512 values now (0.013); a ledger's older 128-value sketch is the new one's prefix, so they still compare."""
    codes = np.arange(0, 40_000, 3, dtype=np.uint64)
    key = sketch_key(b"round secret (test)", "A", 1)
    new, old = minhash(codes, key), minhash(codes, key, 128)
    assert SIZE == 512 and len(new) == 8 * SIZE and new.startswith(old) and similarity(new, old) == 1.0
    other = minhash(codes[: int(len(codes) * 0.85)], key)  # Jaccard 0.85
    assert abs(similarity(new, other) - 0.85) < 4 * (0.85 * 0.15 / SIZE) ** 0.5


def test_the_probe_sees_the_first_context_of_each_task_and_length():
    """Finding 8: per task only, a program could act otherwise at a length the probe never saw."""
    import pandas as pd

    items = pd.DataFrame({"context_id": ["a", "a", "b", "c", "d", "e"], "task": ["t", "t", "t", "t", "u", "u"],
                          "length": [512, 512, 512, 1024, 512, 512]})
    assert list(probe_items(items).context_id.unique()) == ["a", "c", "d"]
