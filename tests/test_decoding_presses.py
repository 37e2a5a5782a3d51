"""H2O and R-KV against selections computed by hand on tiny tensors, and both composing with KVPress."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from kvpress import DecodingPress
from transformers import DynamicCache

from cachecraft_lib.decoding.capped import ratio_keeping
from cachecraft_lib.methods.decode_presses import (
    H2ODecodingPress,
    H2OPress,
    RKVPress,
    received_attention,
    redundancy,
)


def _module(heads: int = 1, kv_heads: int = 1, head_dim: int = 2) -> SimpleNamespace:
    """What a press reads from an attention layer; q_proj is the identity, so queries = hidden states."""
    config = SimpleNamespace(num_attention_heads=heads, num_key_value_heads=kv_heads)
    return SimpleNamespace(config=config, head_dim=head_dim, layer_idx=0, q_proj=torch.nn.Identity())


def _labelled_keys(vectors: list[list[float]]) -> torch.Tensor:
    return torch.tensor(vectors, dtype=torch.float32)[None, None]  # (1, 1, L, d)


def _kept(press, keys: torch.Tensor, attentions: torch.Tensor | None, hidden=None, kwargs=None) -> set[int]:
    """Indices kept by ScorerPress.compress (values carry each token's index, so the survivors name themselves)."""
    values = torch.arange(keys.shape[2], dtype=torch.float32).view(1, 1, -1, 1).expand(*keys.shape[:3], 2)
    hidden = torch.zeros(1, keys.shape[2], 2) if hidden is None else hidden
    _, kept = press.compress(_module(), hidden, keys, values.contiguous(), attentions, kwargs or {})
    return {int(v) for v in kept[0, 0, :, 0]}


# rows: the attention each query paid (causal; each row sums to 1). Column sums (attention received):
# token 0: 2.2, 1: 1.5, 2: 0.9, 3: 0.4, 4: 0.7, 5: 0.3
ATTENTION = torch.tensor([
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.5, 0.5, 0.0, 0.0, 0.0, 0.0],
    [0.2, 0.2, 0.6, 0.0, 0.0, 0.0],
    [0.1, 0.6, 0.1, 0.2, 0.0, 0.0],
    [0.1, 0.1, 0.1, 0.1, 0.6, 0.0],
    [0.3, 0.1, 0.1, 0.1, 0.1, 0.3],
])[None, None]
KEYS6 = _labelled_keys([[1, 0]] * 6)


def test_h2o_keeps_heavy_hitters_and_the_recent_half():
    # keep 4: the newest 2 (tokens 4, 5) by the recent window, then the 2 heaviest of the rest: 0 (2.2), 1 (1.5)
    press = H2OPress(ratio_keeping(6, 4), recent_fraction=0.5)
    assert _kept(press, KEYS6, ATTENTION) == {0, 1, 4, 5}
    # no recent window: the 4 heaviest, 0 (2.2), 1 (1.5), 2 (0.9), 4 (0.7); token 5 (0.3) is evicted
    assert _kept(H2OPress(ratio_keeping(6, 4), recent_fraction=0.0), KEYS6, ATTENTION) == {0, 1, 2, 4}


def test_h2o_reads_a_running_sum_as_kvpress_camp_press_passes_it():
    running = torch.tensor([[[0.1, 5.0, 0.2, 3.0, 0.0, 0.0]]])  # (B, H_kv, L)
    assert _kept(H2OPress(ratio_keeping(6, 3), recent_fraction=0.0), KEYS6, running) == {1, 3, 2}
    with pytest.raises(ValueError, match="pruned with the cache"):
        _kept(H2OPress(0.5), KEYS6, running[..., :5])


def test_received_attention_from_queries_is_causal_and_summed():
    # all-zero queries attend uniformly to what they may see: query t gives 1/(t+1) to each of tokens 0..t,
    # so token j receives sum_{t>=j} 1/(t+1): 25/12, 13/12, 7/12, 1/4 for four tokens
    keys = torch.randn(1, 1, 4, 2)
    ones, zeros = torch.ones(1, 4, 2), torch.zeros(1, 4, 2)
    got = received_attention(_module(), torch.zeros(1, 4, 2), keys, None, {"position_embeddings": (ones, zeros)})
    assert torch.allclose(got[0, 0], torch.tensor([25 / 12, 13 / 12, 7 / 12, 1 / 4]))


def test_received_attention_averages_query_heads_of_a_kv_head():
    attn = torch.zeros(1, 2, 1, 3)
    attn[0, 0, 0] = torch.tensor([1.0, 0.0, 0.0])
    attn[0, 1, 0] = torch.tensor([0.0, 0.0, 1.0])
    got = received_attention(_module(heads=2), None, torch.zeros(1, 1, 3, 2), attn, {})
    assert torch.allclose(got[0, 0], torch.tensor([0.5, 0.0, 0.5]))


# R-KV: tokens 0, 2 and 4 share one key direction (three copies, 4 the newest); token 5 is the query window.
RKV_KEYS = _labelled_keys([[1, 0], [0, 1], [1, 0], [0, -1], [1, 0], [-1, 0]])


def test_rkv_redundancy_by_hand():
    # cosine matrix, self-similarity 0; each row forgives its newest near-duplicate (cos > 0.5):
    # row 0 forgives 4, row 2 forgives 4, row 4 forgives 2. Column means then are
    # token 0: (1 + 1 - 1)/6, 1: -1/6, 2: (1 - 1)/6, 3: -1/6, 4: -1/6, 5: -3/6   (row 5 is the opposite key)
    expected = torch.tensor([1, -1, 0, -1, -1, -3]) / 6
    assert torch.allclose(redundancy(RKV_KEYS)[0, 0], expected.softmax(-1))
    # the oldest copy is the most redundant, the newest the least
    r = redundancy(RKV_KEYS)[0, 0]
    assert r[0] > r[2] > r[4]
    # without forgiveness every copy is equally redundant: (1 + 1 - 1)/6 each
    flat = redundancy(RKV_KEYS, recent_copies=0)[0, 0]
    assert torch.allclose(flat[0], flat[2]) and torch.allclose(flat[2], flat[4])


def test_rkv_drops_the_old_copy_that_attention_alone_would_keep():
    # the window query (token 5) pays 0.3 0.1 0.05 0.2 0.05 (and 0.3 to itself); keep 3 = token 5 + 2 more.
    # importance alone (lambda = 1) keeps the two most attended: 0 and 3.
    # R-KV (lambda = 0.1): Z = 0.1 * attention - 0.9 * softmax(redundancy); softmax of the column means above is
    # 0.222 0.159 0.188 0.159 0.159 (0.114), so Z = -0.170 -0.133 -0.164 -0.123 -0.138: keep 3 and 1; token 0,
    # the most attended but the oldest of three copies, goes.
    attn = torch.zeros(1, 1, 6, 6)
    attn[0, 0, 5] = torch.tensor([0.3, 0.1, 0.05, 0.2, 0.05, 0.3])
    cr = ratio_keeping(6, 3)
    assert _kept(RKVPress(cr, window_size=1, kernel_size=1, mix_lambda=1.0), RKV_KEYS, attn) == {0, 3, 5}
    assert _kept(RKVPress(cr, window_size=1, kernel_size=1, mix_lambda=0.1), RKV_KEYS, attn) == {1, 3, 5}


def test_rkv_importance_is_max_pooled_and_windowed():
    attn = torch.zeros(1, 1, 7, 7)
    attn[0, 0, -2:, 2] = 1.0  # both window queries look at token 2 only
    press = RKVPress(window_size=2, kernel_size=3)
    importance = press.importance(_module(), None, torch.zeros(1, 1, 7, 2), attn, {})
    assert torch.allclose(importance[0, 0], torch.tensor([0.0, 1.0, 1.0, 1.0, 0.0]))  # 7 - 2 window tokens
    with pytest.raises(ValueError, match="last 2 queries"):
        press.importance(_module(), torch.zeros(1, 1, 2), torch.zeros(1, 1, 7, 2), None, {})


def test_presses_validate_their_parameters():
    with pytest.raises(ValueError):
        H2OPress(recent_fraction=1.5)
    with pytest.raises(ValueError):
        RKVPress(kernel_size=4)


# ------------------------------------------------------------------ on the embedded model, through KVPress
def _decode(model, press, prefill: int, steps: int) -> list[int]:
    """Prefill outside the press (as KVPress's pipeline does), then single-token steps inside it."""
    cache, ids = DynamicCache(), torch.randint(5, 400, (1, prefill + steps), generator=torch.Generator().manual_seed(0))
    lengths = []
    with torch.no_grad():
        model.model(input_ids=ids[:, :prefill], past_key_values=cache)
        with press(model):
            for i in range(prefill, prefill + steps):
                model.model(input_ids=ids[:, i:i + 1], past_key_values=cache, position_ids=torch.tensor([[i]]))
                lengths.append(cache.get_seq_length())
    return lengths


def test_both_work_as_prefill_presses(tiny_model):
    model, _ = tiny_model
    ids = torch.randint(5, 400, (1, 120), generator=torch.Generator().manual_seed(1))
    for press in (H2OPress(0.5), RKVPress(0.5)):
        cache = DynamicCache()
        with torch.no_grad(), press(model):
            model.model(input_ids=ids, past_key_values=cache)
        assert [la.keys.shape[2] for la in cache.layers] == [60] * model.config.num_hidden_layers


def test_both_compose_with_kvpress_decoding_press(tiny_model):
    model, _ = tiny_model
    rkv = DecodingPress(RKVPress(), compression_interval=8, target_size=40, hidden_states_buffer_size=8)
    assert _decode(model, rkv, prefill=50, steps=16) == [51, 52, 53, 54, 55, 56, 57, 40, 41, 42, 43, 44, 45, 46,
                                                          47, 40]
    h2o = H2ODecodingPress(compression_interval=4, target_size=40, hidden_states_buffer_size=0)
    lengths = _decode(model, h2o, prefill=50, steps=8)
    assert lengths == [51, 52, 53, 40, 41, 42, 43, 40]


def test_h2o_decoding_press_prunes_its_running_sum_with_the_cache(tiny_model):
    model, _ = tiny_model
    h2o = H2ODecodingPress(compression_interval=4, target_size=40, hidden_states_buffer_size=0)
    seen = []
    original = h2o.compress

    def spy(module, hidden_states, keys, values, attentions, kwargs):
        out = original(module, hidden_states, keys, values, attentions, kwargs)
        seen.append((keys.shape[2], out[0].shape[2], h2o.received[module.layer_idx].shape[-1]))
        return out

    h2o.compress = spy
    _decode(model, h2o, prefill=50, steps=4)
    assert seen and all(after == kept == 40 and before == 54 for before, after, kept in seen)
