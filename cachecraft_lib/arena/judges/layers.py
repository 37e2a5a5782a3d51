"""Real board layers for the rule judge: the board's model prefills contexts the judge draws, and each attention
layer becomes the ``Layer`` a method receives on that board.

Why real layers beside the synthetic probes (``behaviour.probe_layers``): a method sees the probes' fixed
shapes (128 tokens, a 32-query window) and could behave like SnapKV on a board and like something else on
the probes. Real layers come from the board's own model on contexts of the board's tasks and lengths, drawn
from the same generator as the test items with a seed the judge draws (``secrets``) at each review, so the
method cannot tell them from a board's test contexts (nor recognise them as the public dev contexts).
Arrays are built exactly as ``press.SubmissionScorerPress`` builds them (keys and values after RoPE, the last
``press.WINDOW`` queries after RoPE, positions), at each of the board's budgets; the judge calls the method on
them in the board's own sequence (``replay``: a fresh sandbox per context, budget by budget, layer by layer).

A submission that declares probes gets what the harness's probe press gives it: ``BoardLayers.probed(probes)``
runs the probe texts through the model after each judge-drawn context (``probe_press.replay_probes``, the
press's own replay, on a copy of the context's uncompressed cache) and sets every layer's ``probe_queries`` and
``probe_lengths``. The layers keep what replays them, so callers draw the layers once, before they know which
submission (or which probes) the judge will review.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..submissions.method_api import Layer

CONTEXTS = 2  # contexts per review: enough layers to compare kept entries, a few seconds on a CPU


def judge_seed() -> int:
    """A fresh seed for the judge's contexts: in the test seeds' range, unpredictable, never a reserved seed."""
    from ..boards.splits import TEST_HIGH, TEST_LOW, is_reserved

    while True:
        seed = TEST_LOW + secrets.randbelow(TEST_HIGH - TEST_LOW)
        if not is_reserved(seed):
            return seed


Replay = Callable[[tuple[str, ...]], list[list[Any]]]  # probes -> per layer, each probe's (H_q, n_i, D) queries


class BoardLayers(list):
    """Real layers (a list of ``Layer``) that can replay a submission's probes after the contexts they come from."""

    def __init__(self, layers: Any = ()) -> None:
        super().__init__(layers)
        self.replays: list[tuple[int, int, Replay]] = []  # (start, stop, replay): self[start:stop] is one context

    def add_context(self, layers: list[Layer], replay: Replay) -> None:
        self.replays.append((len(self), len(self) + len(layers), replay))
        self.extend(layers)

    def probed(self, probes: tuple[str, ...]) -> list[Layer]:
        """The layers with ``probe_queries``/``probe_lengths`` of ``probes`` replayed after their context."""
        from ..submissions.probe_press import probe_arrays

        out = list(self)
        for start, stop, replay in self.replays:
            queries = replay(tuple(probes))
            for i in range(start, stop):
                layer = out[i]
                out[i] = replace(layer, **probe_arrays(queries[layer.layer], layer.queries.shape[0], layer.keys.shape[2]))
        return out


def context_layers(model: Any, tokenizer: Any, text: str, answer_prefix: str, budgets: tuple[float, ...],
                   with_replay: bool = False) -> list[Layer] | tuple[list[Layer], Replay]:
    """Every attention layer of one prefill of ``text``, as the method's ``Layer``, at each budget (kept share);
    ``with_replay``: also the function that replays probe texts after this context (``BoardLayers.probed``)."""
    import torch
    from kvpress.utils import compute_n_kept

    from ...models.pipeline import make_pipeline
    from ...models.prefill import SharedPrefill
    from ..submissions.press import WINDOW, key_positions, window_queries

    ids = make_pipeline(model, tokenizer).preprocess(text, [""], answer_prefix, max_context_length=10**9)
    shared = SharedPrefill(model, ids["context_ids"])
    n_layers = len(shared.layers)
    out = []
    with torch.no_grad():
        for module, hidden, keys, values, kwargs in shared.layers:
            queries = window_queries(module, hidden, kwargs, WINDOW)[0].float().cpu().numpy()
            positions = key_positions(kwargs, keys.shape[2], 1)[0]
            k, v = keys[0].float().cpu().numpy(), values[0].float().cpu().numpy()
            for keep in budgets:
                ratio = round(1.0 - keep, 6)
                out.append(Layer(k, v, queries, positions, int(compute_n_kept(keys.shape[2], ratio)),
                                 int(getattr(module, "layer_idx", 0)), n_layers, ratio))
    if not with_replay:
        return out

    def replay(probes: tuple[str, ...]) -> list[list[Any]]:
        from ..submissions.probe_press import replay_probes

        return replay_probes(model, tokenizer, shared.cache_for(None), probes)

    return out, replay


def board_layers(model: Any, tokenizer: Any, board: Any, contexts: int = CONTEXTS, seed: int | None = None,
                 source: str = "offline") -> tuple[BoardLayers, int]:
    """(layers of ``contexts`` judge-drawn contexts of ``board``, the seed that drew them)."""
    from ..boards.items import generated_contexts

    seed = judge_seed() if seed is None else seed
    rows = generated_contexts(board, tokenizer, seed, source)
    rows = rows.groupby("task", sort=False).head(1).head(contexts)
    layers = BoardLayers()
    for row in rows.itertuples(index=False):
        text = row.context + row.question if board.query_aware else row.context
        layers.add_context(*context_layers(model, tokenizer, text, row.answer_prefix, tuple(board.budgets), True))
    return layers, seed


def arena_layers(arena: Any, board_name: str, contexts: int = CONTEXTS, seed: int | None = None) -> BoardLayers:
    """``board_layers`` with an ``Arena``'s model for ``board_name`` (what the CLI and notebook 07 pass)."""
    board = arena.board(board_name)
    model, tokenizer = arena.model(board)
    return board_layers(model, tokenizer, board, contexts, seed, arena._source())[0]
