"""The rule judge's numpy forms of the baselines keep what KVPress's presses keep (on the embedded model's
prefill), so a submission close to a form is close to the published method, not to a look-alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from kvpress import KnormPress, ScorerPress, SnapKVPress, StreamingLLMPress, TOVAPress
from kvpress.utils import compute_n_kept

from cachecraft_lib.arena.judges import numpy_baselines
from cachecraft_lib.arena.submissions.method_api import Layer
from cachecraft_lib.arena.submissions.press import key_positions, window_queries
from cachecraft_lib.models.prefill import SharedPrefill

WINDOW, RATIO = 32, 0.5


@dataclass
class FormPress(ScorerPress):
    """A form run in-process (trusted code) on the Layer the arena would give a submission."""

    form: Any = None
    window: int = WINDOW

    def score(self, module, hidden_states, keys, values, attentions, kwargs) -> torch.Tensor:
        budget = compute_n_kept(keys.shape[2], self.compression_ratio)
        layer = Layer(keys[0].float().numpy(), values[0].float().numpy(),
                      window_queries(module, hidden_states, kwargs, self.window)[0].float().numpy(),
                      key_positions(kwargs, keys.shape[2], 1)[0], budget, int(module.layer_idx), 2,
                      self.compression_ratio)
        return torch.from_numpy(np.asarray(self.form(layer), dtype=np.float32))[None]


@pytest.fixture(scope="module")
def prefill():
    from cachecraft_lib.models.loading import load_model

    model, _ = load_model("tiny", device="cpu", dtype="float32")
    torch.manual_seed(0)
    return SharedPrefill(model, torch.randint(10, 1000, (1, 200)))


def _kept(scores: torch.Tensor, budget: int) -> list[set[int]]:
    return [set(row.topk(budget).indices.tolist()) for row in scores.reshape(-1, scores.shape[-1])]


@pytest.mark.parametrize("name, press", [("snapkv", SnapKVPress(RATIO, window_size=WINDOW)), ("tova", TOVAPress(RATIO)),
                                         ("knorm", KnormPress(RATIO)), ("streaming_llm", StreamingLLMPress(RATIO))])
def test_a_form_keeps_what_its_press_keeps(prefill, name, press):
    theirs = prefill.scores_for(press)
    ours = prefill.scores_for(FormPress(RATIO, form=numpy_baselines.FORMS[name]))
    budget = compute_n_kept(prefill.context_length, RATIO)
    for layer, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a.shape == b.shape, (name, layer)
        assert _kept(a, budget) == _kept(b, budget), (name, layer)
