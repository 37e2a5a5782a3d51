"""Model loading: clear errors for a missing hub model or untrained folder; the embedded model loads."""

from __future__ import annotations

import pytest

from cachecraft_lib.models.loading import ModelUnavailable, is_embedded, load_model, resolve


def test_hub_model_unreachable_is_a_clear_error(monkeypatch):
    import time

    from cachecraft_lib.ruler import dataset

    monkeypatch.setattr(dataset, "hub_reachable", lambda timeout=3.0: False)  # as on this machine and in CI
    start = time.time()
    with pytest.raises(ModelUnavailable, match="hf auth login"):
        load_model("meta-llama/Llama-3.1-8B-Instruct-does-not-exist")
    assert time.time() - start < 20  # no half-minute of retries


def test_folder_without_weights_says_how_to_train(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelUnavailable, match="train-tiny"):
        load_model(tmp_path)


def test_aliases_and_embedded_label():
    assert resolve("tiny").endswith("data/models/tiny-ruler-llama")
    assert is_embedded("tiny") and not is_embedded("Qwen/Qwen3-8B")


def test_embedded_model_structure():
    model, tokenizer = load_model("tiny", device="cpu")
    cfg = model.config
    assert cfg.model_type == "llama" and cfg.num_hidden_layers >= 4
    assert cfg.num_key_value_heads >= 4 and cfg.num_attention_heads // cfg.num_key_value_heads >= 2
    assert cfg._attn_implementation == "sdpa"
    assert len(tokenizer) <= 4096 and tokenizer.bos_token_id is not None and tokenizer.eos_token_id is not None
    assert tokenizer.tokenize("8090293") == list("8090293")  # digits are single tokens
