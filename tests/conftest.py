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


@pytest.fixture(scope="session")
def tiny_model():
    from cachecraft_lib.models.loading import load_model

    return load_model("tiny", device="cpu")


@pytest.fixture(scope="session")
def tiny_rows(tiny_model):
    from cachecraft_lib.ruler import generate

    return generate(1024, tiny_model[1], samples_per_task=1, seed=11, tasks=["niah_single_1", "vt", "qa_1"])


@pytest.fixture()
def tiny_answerer():
    """A fresh model copy: Finch adds a delimiter token to the model and tokenizer it runs on."""
    from cachecraft_lib.models.loading import load_model
    from cachecraft_lib.models.pipeline import Answerer

    return Answerer(*load_model("tiny", device="cpu"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: on two cores shared with other jobs, two threads spin-wait (measured: many
    times slower for the 30-layer instruct model). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
