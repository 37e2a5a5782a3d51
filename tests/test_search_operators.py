"""The structural operators (search/operators.py): neutral lift, valid programs, determinism, opt-in."""

from __future__ import annotations

import asyncio
import random
import re

import numpy as np
import pytest

from cachecraft_lib.methods.features import FEATURES, FeatureContext
from cachecraft_lib.methods.policy import load_policy, run_policy, validate_selection
from cachecraft_lib.search import mutator, operators
from cachecraft_lib.search.seeds import SEEDS
from cachecraft_lib.search.static_checks import outside_block, stage0

V1 = SEEDS["v1"].read_text()
BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)\n>>>>>>> REPLACE", re.DOTALL)


def apply(code: str, reply: str) -> str:
    """Apply every SEARCH/REPLACE block in order, as OpenEvolve does."""
    blocks = BLOCK.findall(reply)
    assert blocks, reply
    for search, replace in blocks:
        assert search in code, search
        code = code.replace(search, replace, 1)
    return code


def context(seed: int, layer: int = 5, length: int = 300, ratio: float = 0.8) -> FeatureContext:
    rng = np.random.default_rng(seed)
    feats = {name: rng.random(length).astype(np.float32) for name in FEATURES}
    feats["rel_position"] = np.linspace(0, 1, length, dtype=np.float32)
    k = max(1, int(length * (1 - ratio)))
    return FeatureContext(features=feats, L=length, K=k, H=3, Q=64, layer=layer, compression_ratio=ratio)


def selection(code: str, ctx: FeatureContext, tmp_path, name: str) -> np.ndarray:
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    kept = run_policy(load_policy(path, name), ctx)
    return validate_selection(kept, ctx.L, ctx.compression_ratio, ctx.chunk_length)


def test_lift_keeps_the_scores_of_the_program_it_rewrites(tmp_path):
    for i, code in enumerate([V1, V1.replace('SELECTION = "tokenwise"', 'SELECTION = "chunked"')]):
        diff, _ = operators.lift(code, mutator.parse_scorer(code))
        lifted = apply(code, diff)
        assert operators.is_structured(lifted) and stage0(lifted, code) == []
        assert outside_block(lifted) == outside_block(code)
        for seed in range(3):
            ctx = context(seed)
            assert np.array_equal(selection(code, ctx, tmp_path, f"a{i}{seed}"), selection(lifted, ctx, tmp_path, f"b{i}{seed}"))


@pytest.mark.parametrize("name", operators.OPERATORS)
def test_every_operator_writes_a_valid_program(name, tmp_path):
    code = apply(V1, operators.lift(V1, mutator.parse_scorer(V1))[0])
    for step in range(4):  # repeated edits of one knob stay valid
        diff, desc = operators.apply_operator(code, name, random.Random(step))
        code = apply(code, diff)
        assert desc and stage0(code, V1) == [] and mutator.parse_scorer(code) is not None
        for layer in (0, 29):
            selection(code, context(step, layer=layer), tmp_path, f"{name}{step}{layer}")


def test_product_sinks_and_window_change_what_is_kept(tmp_path):
    code = apply(V1, operators.lift(V1, mutator.parse_scorer(V1))[0])
    ctx = context(1)
    base = selection(code, ctx, tmp_path, "base")
    product = code.replace('COMBINE = "none"', 'COMBINE = "product"')
    assert not np.array_equal(base, selection(product, ctx, tmp_path, "prod"))
    kept = selection(code.replace("SINKS = 0", "SINKS = 4").replace("WINDOW = 0", "WINDOW = 16"), ctx, tmp_path, "sw")
    assert set(range(4)) <= set(kept) and set(range(ctx.L - 16, ctx.L)) <= set(kept)


def _reply(structural: bool, seed: int, code: str = V1) -> str:
    prompt = f"# Current Program\n```python\n{code}\n```\n"
    mut = mutator.OfflineMutator(structural=structural)
    return asyncio.run(mut.generate_with_context("", [{"role": "user", "content": prompt}], seed=seed))


def test_structural_mutator_is_deterministic_and_its_chains_stay_valid(tmp_path):
    assert [_reply(True, s) for s in range(6)] == [_reply(True, s) for s in range(6)]
    code, structural_seen = V1, 0
    for seed in range(40):
        reply = _reply(True, seed, code)
        code = apply(code, reply)
        structural_seen += operators.is_structured(code)
        assert stage0(code, V1) == [] and outside_block(code) == outside_block(V1)
    assert operators.is_structured(code) and structural_seen
    selection(code, context(0), tmp_path, "chain")


def test_default_mutator_is_unchanged_without_the_option():
    """Notebook 05's run: the default mutator answers exactly what edit_scorer proposes for the same draws."""
    for seed in range(20):
        diff, desc = mutator.edit_scorer(V1, mutator.proposal_rng(seed, ""))
        assert _reply(False, seed) == f"Proposed change: {desc}\n\n{diff}"


def test_the_mode_travels_in_the_model_name():
    from cachecraft_lib.search.evolve import build_config

    plain = build_config(3).llm.models[0]
    structural = build_config(3, structural=True).llm.models[0]
    assert not mutator.init_offline_client(plain).structural
    assert mutator.init_offline_client(structural).structural
    with pytest.raises(ValueError, match="offline"):
        build_config(3, mutator="ollama", structural=True)
