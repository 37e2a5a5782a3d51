"""The rule judge calls a method exactly as a board does (issue 47, item 5): a fresh sandbox per context, budget by
budget, layer by layer, with the board's limits; so a method that watches how it is called cannot behave like
SnapKV on the board and otherwise for the judge."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cachecraft_lib.arena.judges import load_bundle, review_rules
from cachecraft_lib.arena.judges.behaviour import measure, probe_layers
from cachecraft_lib.arena.judges.replay import board_order, contexts
from cachecraft_lib.arena.submissions.sandbox import Limits, MethodSandbox

FRC = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "frc"
DODGES = Path(__file__).parent / "assets" / "judges" / "snapkv_dodges_probes"  # a DESCRIPTION naming no source
# SnapKV (the window's attention, pooled), written with other operations than its numpy form, taken only when
# the calls look like a board's: one context per sandbox, budget by budget, layers 0..n-1, and not the judge's
# synthetic probes (their fixed shape); otherwise it keeps the largest key norms (another method).
TELLS_THE_JUDGE = '''import math

import numpy as np


class Method:
    """Echo salience, but only where it believes it is being scored."""

    def __init__(self):
        self.calls = []
        self.judged = False

    def _looks_like_a_board(self, chunk):
        self.calls.append((chunk.layer, chunk.budget, chunk.n_tokens))
        i = len(self.calls) - 1
        same_context = len({c[2] for c in self.calls}) == 1
        in_order = chunk.layer == i % chunk.n_layers
        block_start = i - i % chunk.n_layers
        one_budget = all(c[1] == self.calls[block_start][1] for c in self.calls[block_start:])
        probes = chunk.keys.shape[1] == 128 and chunk.queries.shape[1] == 32
        self.judged = self.judged or not (same_context and in_order and one_budget) or probes
        return not self.judged

    def score(self, chunk):
        if not self._looks_like_a_board(chunk):
            return np.linalg.norm(chunk.keys, axis=-1)
        probe, memory = chunk.queries, np.repeat(chunk.keys, chunk.groups, axis=0)
        span, total = probe.shape[1], memory.shape[1]
        energy = probe @ memory.transpose(0, 2, 1) / math.sqrt(probe.shape[-1])
        energy = np.where(np.triu(np.ones((span, total), dtype=bool), k=total - span + 1), -np.inf, energy)
        echo = np.exp(energy - energy.max(axis=-1, keepdims=True))
        echo /= echo.sum(axis=-1, keepdims=True)
        trail = np.pad(echo[..., : total - span].mean(axis=1), ((0, 0), (2, 2)))
        salience = sum(trail[:, j : j + total - span] for j in range(5)) / 5
        salience = salience.reshape(chunk.n_kv_heads, chunk.groups, -1).mean(axis=1)
        return np.concatenate([salience, np.full((chunk.n_kv_heads, span), salience.max() + 1)], axis=1)
'''


def _hostile(tmp_path: Path) -> Path:
    folder = tmp_path / "tells-the-judge"
    shutil.copytree(DODGES, folder)
    (folder / "method.py").write_text(TELLS_THE_JUDGE)
    (folder / "metadata.yaml").write_text("name: echo-salience-3\nauthor: agent11\nboards: [A]\n")
    return folder


@pytest.fixture()
def recorded_calls(monkeypatch):
    """Every method call through any ``MethodSandbox``: (sandbox, layer, budget, ratio, tokens, limits)."""
    calls: list[tuple] = []
    original = MethodSandbox.call_parts

    def call_parts(self, arrays, **scalars):
        calls.append((id(self), scalars["layer"], scalars["budget"], scalars["compression_ratio"],
                      arrays["keys"].shape[1], tuple(sorted(vars(self.limits).items()))))
        return original(self, arrays, **scalars)

    monkeypatch.setattr(MethodSandbox, "call_parts", call_parts)
    return calls


def _by_sandbox(calls: list[tuple]) -> list[list[tuple]]:
    """The calls each sandbox saw, sandboxes in the order they were first called (what the method can observe)."""
    seen: dict[int, list[tuple]] = {}
    for call in calls:
        seen.setdefault(call[0], []).append(call[1:])
    return list(seen.values())


def test_the_judge_calls_each_context_in_a_fresh_sandbox_budget_by_budget(recorded_calls):
    """On layers given layer by layer at every budget (the order ``layers.context_layers`` builds them), two
    contexts' worth: each context reaches the method in a sandbox of its own, budget by budget, layers 0..n-1."""
    layers = probe_layers()
    second = [layer.__class__(**{**vars(layer), "keys": layer.keys[:, :96], "values": layer.values[:, :96],
                                 "positions": layer.positions[:96], "budget": layer.budget * 3 // 4})
              for layer in layers]
    assert contexts(layers + second) == [list(range(len(layers))), list(range(len(layers), 2 * len(layers)))]
    measure(load_bundle(FRC), real=layers + second)
    per_box = _by_sandbox(recorded_calls)
    assert len(per_box) == 3  # the probes, then each real context: one sandbox each
    for seen in per_box:
        ratios = list(dict.fromkeys(c[2] for c in seen))
        assert [(c[0], c[2]) for c in seen] == [(i, r) for r in ratios for i in range(layers[0].n_layers)]
        assert len({c[3] for c in seen}) == 1  # one context's tokens per sandbox
    assert {c[-1] for c in recorded_calls} == {tuple(sorted(vars(Limits()).items()))}  # the board's limits
    assert board_order([0, 1, 2, 3], [layers[i] for i in (0, 1, 2, 3)]) == [0, 2, 1, 3]


@pytest.fixture(scope="module")
def board_and_layers(tiny_model):
    """Smoke board A, its judge-drawn real layers and the same two contexts as board items."""
    from cachecraft_lib.arena.boards.boards import load_boards
    from cachecraft_lib.arena.boards.items import generated_contexts
    from cachecraft_lib.arena.judges.layers import board_layers

    board, seed = load_boards("smoke")["A"], 3_100_000_321
    layers, _ = board_layers(*tiny_model, board, seed=seed)
    rows = generated_contexts(board, tiny_model[1], seed, "offline").groupby("task", sort=False).head(1).head(2)
    items = rows.reset_index(drop=True).assign(item=lambda d: d.index, context_id=lambda d: d.index,
                                               length=board.lengths[0], max_new_tokens=2)
    return board, layers, items


@pytest.mark.slow
def test_the_judges_calls_are_the_boards_calls(board_and_layers, tiny_model, recorded_calls, tmp_path):
    """The board's own runner and the judge, on the same two contexts: every sandbox sees the same calls (layer,
    budget, ratio, tokens, limits) in the same order; and a method that watches its calls for the board's pattern
    behaves like SnapKV for the judge too, so the judge finds the copy."""
    from cachecraft_lib.arena.board_runner import BoardRunner, submission_contender
    from cachecraft_lib.arena.submissions.folder import load_submission

    board, layers, items = board_and_layers
    folder = _hostile(tmp_path)
    BoardRunner(*tiny_model, board).run(items, [submission_contender(load_submission(folder))], progress=False)
    on_board = _by_sandbox(recorded_calls)
    recorded_calls.clear()
    result = review_rules(load_bundle(folder), layers=layers)
    for_judge = _by_sandbox(recorded_calls)[1:]  # after the synthetic probes' sandbox
    assert review_rules(load_bundle(folder), probe=False).flags == ()  # its tokens alone do not give it away
    assert result.details["behaviour_by_layers"]["probe"]["snapkv"] < 0.9  # it dodges the probes ...
    assert result.details["behaviour_by_layers"]["real"]["snapkv"] >= 0.98  # ... not the board's calls
    assert result.flags == ("UNDISCLOSED_PRIOR_ART",) and result.novelty == 0, result.notes
    assert len(on_board) == len(items) == 2 and for_judge == on_board
