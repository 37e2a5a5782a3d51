"""The rule judge's calls in the board's own order, so that a method cannot tell the judge from a board.

What a method sees on a board (``board_runner``): before every context its sandbox is ended
(``over_contexts``), so each context starts a fresh ``Method``; within a context the contender's press runs
once per budget, in the board's order (``board.budgets``), and each press calls the method layer by layer,
0 to n-1 (``SharedPrefill.cache_for``), or calls ``whole_cache`` once (boards that run it). A method that counts
its calls, remembers the token counts it saw or watches the order of layers and budgets would tell a judge
that called it otherwise (layer by layer at every budget, one sandbox for all contexts) from a board, and could
behave like SnapKV on the board only. So the judge replays the board's sequence: ``contexts`` splits its layers
into contexts, ``board_order`` orders one context's layers budget by budget and layer by layer, and the judge
(``behaviour``) gives each context, and each hook, a sandbox of its own, with the board's limits.
"""

from __future__ import annotations

from typing import Any

from ..submissions.method_api import Layer


def contexts(layers: Any) -> list[list[int]]:
    """The indices of ``layers`` grouped by the context they come from: ``BoardLayers``' own spans, or, for a
    plain list, runs of layers of one token count in which no (budget, layer) repeats."""
    spans = getattr(layers, "replays", None)
    if spans:
        return [list(range(start, stop)) for start, stop, _ in spans]
    out: list[list[int]] = []
    seen: set[tuple] = set()
    shape: tuple | None = None
    for i, layer in enumerate(layers):
        key = (layer.compression_ratio, layer.layer)
        if not out or key in seen or (layer.n_tokens, layer.n_layers) != shape:
            out.append([])
            seen = set()
            shape = (layer.n_tokens, layer.n_layers)
        out[-1].append(i)
        seen.add(key)
    return out


def board_order(indices: list[int], layers: list[Layer]) -> list[int]:
    """One context's ``indices`` in the order a board calls them: budget by budget (in the order the budgets
    first appear, the board's ``budgets`` order), and within a budget layer 0 to n-1."""
    budgets: dict[float, int] = {}
    for i in indices:
        budgets.setdefault(layers[i].compression_ratio, len(budgets))
    return sorted(indices, key=lambda i: (budgets[layers[i].compression_ratio], layers[i].layer))
