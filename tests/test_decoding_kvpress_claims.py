"""Four claims about KVPress 0.5.5's DecodingPress, each checked on the embedded model; each test asserts
what was found. Summary in cachecraft_lib/decoding/README.md."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch
from kvpress import DecodingPress, KnormPress, ScorerPress, SnapKVPress
from transformers import DynamicCache

from cachecraft_lib.methods.attention import query_attention

PREFILL, TARGET, INTERVAL = 50, 40, 4


@dataclass
class SpyPress(ScorerPress):
    """Knorm scores, and a record of what DecodingPress hands its base press at each compression."""

    calls: list[dict] = field(default_factory=list)
    window: int = 0  # > 0: also compute KVPress's window attention over that many buffered queries

    def score(self, module, hidden_states, keys, values, attentions, kwargs):
        cos, sin = kwargs["position_embeddings"]
        call = {"layer": module.layer_idx, "hidden": hidden_states.shape[1], "rotary": cos.shape[1],
                "position": int(kwargs["cache_position"][-1])}
        if self.window and module.layer_idx == 0:
            call["kvpress"] = SnapKVPress.compute_window_attention(module, hidden_states, keys, self.window,
                                                                   (cos, sin))
            positions = torch.arange(call["position"] - self.window + 1, call["position"] + 1)[None]
            right = module.rotary_emb(hidden_states, positions) if hasattr(module, "rotary_emb") else None
            call["own_positions"] = query_attention(module, hidden_states[:, -self.window:], keys, right)
        self.calls.append(call)
        return -keys.norm(dim=-1)


def _run(model, press, steps: int, prefill: int = PREFILL, chunk: int = 1) -> list[tuple[int, int, int]]:
    """Prefill outside the press (as KVPress's pipeline does), then forwards of ``chunk`` tokens inside it.

    Returns (step, layer, cache length the layer's attention ran over), read on the cache tensor by a hook
    that runs before the press's own hook."""
    seen: list[tuple[int, int, int]] = []
    step = [0]

    def watch(module, args, kwargs, output):
        seen.append((step[0], module.layer_idx, kwargs["past_key_values"].layers[module.layer_idx].keys.shape[2]))

    ids = torch.randint(5, 400, (1, prefill + steps * chunk), generator=torch.Generator().manual_seed(0))
    cache = DynamicCache()
    hooks = [layer.self_attn.register_forward_hook(watch, with_kwargs=True) for layer in model.model.layers]
    try:
        with torch.no_grad():
            model.model(input_ids=ids[:, :prefill], past_key_values=cache)
            with press(model):
                for s in range(steps):
                    step[0] = s + 1
                    start = prefill + s * chunk
                    model.model(input_ids=ids[:, start:start + chunk], past_key_values=cache,
                                position_ids=torch.arange(start, start + chunk)[None])
    finally:
        for h in hooks:
            h.remove()
    return [x for x in seen if x[0] > 0]


def test_a_cache_swings_between_target_and_target_plus_interval(tiny_model):
    """TRUE: every layer is trimmed to target_size once per compression_interval forwards; in between the
    cache grows, so attention runs over up to target + interval entries; a hard cap C needs target = C - interval."""
    model, _ = tiny_model
    press = DecodingPress(KnormPress(), compression_interval=INTERVAL, target_size=TARGET, hidden_states_buffer_size=0)
    seen = _run(model, press, steps=13)
    layers = model.config.num_hidden_layers
    per_step = {s: {length for st, _, length in seen if st == s} for s in range(1, 14)}
    assert all(len(v) == 1 for v in per_step.values())  # every layer alike at every step
    lengths = [per_step[s].pop() for s in range(1, 14)]
    # before the first trim it grows from the prefill (51..54), then 41..44 each cycle
    assert lengths == [51, 52, 53, 54, 41, 42, 43, 44, 41, 42, 43, 44, 41]
    assert max(lengths[INTERVAL:]) == TARGET + INTERVAL and min(lengths[INTERVAL:]) == TARGET + 1
    assert len(seen) == 13 * layers
    # so target = cap - interval holds a cap of 44 after the first compression
    capped = DecodingPress(KnormPress(), compression_interval=INTERVAL, target_size=44 - INTERVAL,
                           hidden_states_buffer_size=0)
    assert max(length for s, _, length in _run(model, capped, steps=13) if s > INTERVAL) == 44


def test_b_buffer_counts_forwards_and_is_emptied_at_each_compression(tiny_model):
    """TRUE: hidden_states_buffer_size counts forwards, not tokens (3-token forwards, size 1: the base press
    gets 2 forwards = 6 tokens), and the buffer is emptied after every compression, so the base press never
    sees more than the forwards since the last one (interval 4, buffer 256: 4 hidden states)."""
    model, _ = tiny_model
    spy = SpyPress()
    press = DecodingPress(spy, compression_interval=3, target_size=TARGET, hidden_states_buffer_size=1)
    _run(model, press, steps=6, chunk=3)
    assert {c["hidden"] for c in spy.calls} == {6}
    spy = SpyPress()
    press = DecodingPress(spy, compression_interval=INTERVAL, target_size=TARGET, hidden_states_buffer_size=256)
    emptied = []
    original = press.compress

    def compress(module, *args):
        out = original(module, *args)
        emptied.append(len(press.hidden_states_buffer[module.layer_idx]))
        return out

    press.compress = compress
    _run(model, press, steps=12)
    assert {c["hidden"] for c in spy.calls} == {INTERVAL}  # 4 of a possible 256
    assert len(spy.calls) == 3 * model.config.num_hidden_layers
    # right after compress() the buffer still holds this cycle (emptied by the hook just after); at the next
    # step it holds one forward again
    assert set(emptied) == {INTERVAL}
    assert all(len(b) == 0 for b in press.hidden_states_buffer.values())  # reset on leaving the press


def test_c_snapkv_base_fails_at_single_token_steps(tiny_model):
    """TRUE: with single-token steps the base press gets one hidden state per forward since the last
    compression; SnapKV asserts more than its 64-query window. It runs only once 65+ forwards are buffered."""
    model, _ = tiny_model
    press = DecodingPress(SnapKVPress(), compression_interval=1, target_size=TARGET, hidden_states_buffer_size=256)
    with pytest.raises(AssertionError, match="Query length 1 should be greater than the window size 64"):
        _run(model, press, steps=1)
    press = DecodingPress(SnapKVPress(), compression_interval=64, target_size=TARGET, hidden_states_buffer_size=256)
    with pytest.raises(AssertionError, match="Query length 64 should be greater"):
        _run(model, press, steps=64)
    press = DecodingPress(SnapKVPress(), compression_interval=65, target_size=TARGET, hidden_states_buffer_size=256)
    assert _run(model, press, steps=65)[-1][2] == PREFILL + 65  # compressed after this forward, no error


def test_d_buffered_queries_all_get_the_current_tokens_rotary_position(tiny_model):
    """TRUE: at single-token steps position_embeddings cover one token, so KVPress's window attention rotates
    every buffered query at the current position: only the newest query's attention is right."""
    model, _ = tiny_model
    spy = SpyPress(window=INTERVAL)
    press = DecodingPress(spy, compression_interval=INTERVAL, target_size=TARGET, hidden_states_buffer_size=256)
    _run(model, press, steps=INTERVAL)
    call = next(c for c in spy.calls if "kvpress" in c)
    assert call["hidden"] == INTERVAL and call["rotary"] == 1  # 4 buffered queries, rotary of 1 token
    kvpress, right = call["kvpress"], call["own_positions"][..., :-INTERVAL]
    assert torch.allclose(kvpress[..., -1, :], right[..., -1, :], atol=1e-5)  # the current token: right
    for row in range(INTERVAL - 1):  # every earlier buffered query: rotated at the wrong position
        assert (kvpress[..., row, :] - right[..., row, :]).abs().max() > 1e-3
