"""Shared fixtures: the small tokenizer shipped with the tests and generated RULER tables."""

from __future__ import annotations

from pathlib import Path

import pytest

ASSETS = Path(__file__).parent / "assets"


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(ASSETS / "tokenizer"))


@pytest.fixture(scope="session")
def ruler_1024(tokenizer):
    from cachecraft_lib.ruler import generate

    return generate(1024, tokenizer, samples_per_task=4, seed=42)
