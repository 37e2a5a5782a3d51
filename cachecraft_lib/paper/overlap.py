"""Do two presses keep the same tokens? Kept-token overlap per layer, on a few contexts (notebook 04's ablation).

Why: an ablation row that scores exactly like full FRC on every sample can mean the dropped term changed which
tokens are kept and the model did not need them, or that it changed nothing at all. The scores cannot tell the
two apart; the kept indices can. Each press runs one prefill per context with ``record=True`` (the indices
``WholeChunkPress`` keeps, batch row 0, per layer); a press that cannot record (ChunkKV) is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import torch

from ..methods.registry import make_press


def kept_indices(model: Any, input_ids: torch.Tensor, method: str, ratio: float) -> dict[int, set[int]] | None:
    """The token indices ``method`` keeps on each layer in one prefill of ``input_ids``; None when its press
    cannot record them."""
    press = make_press(method, ratio)
    if not hasattr(press, "record"):
        return None
    press.record = True
    with torch.no_grad(), press(model):
        model.model(input_ids=input_ids.to(model.device))
    return {layer: set(idx.tolist()) for layer, idx in press.kept.items()}


def layer_overlap(reference: dict[int, set[int]], other: dict[int, set[int]]) -> list[dict[str, Any]]:
    """Per layer: tokens each keeps, tokens both keep, ``shared`` (both / the reference's) and ``identical``."""
    if reference.keys() != other.keys():
        raise ValueError(f"the presses recorded different layers: {sorted(reference)} vs {sorted(other)}")
    return [{"layer": layer, "kept_reference": len(reference[layer]), "kept": len(other[layer]),
             "both": len(reference[layer] & other[layer]),
             "shared": len(reference[layer] & other[layer]) / max(len(reference[layer]), 1),
             "identical": reference[layer] == other[layer]} for layer in sorted(reference)]


def kept_overlap(model: Any, contexts: Sequence[torch.Tensor], methods: Iterable[str], ratio: float,
                 reference: str = "frc") -> pd.DataFrame:
    """One row per (method, context, layer): how much of ``reference``'s kept tokens ``method`` keeps too."""
    rows = []
    for k, ids in enumerate(contexts):
        ref = kept_indices(model, ids, reference, ratio)
        if ref is None:
            raise ValueError(f"{reference} cannot record its kept indices; pick a whole-chunk press as reference")
        for method in methods:
            kept = ref if method == reference else kept_indices(model, ids, method, ratio)
            if kept is not None:
                rows += [{"method": method, "context": k, **r} for r in layer_overlap(ref, kept)]
    return pd.DataFrame(rows, columns=["method", "context", "layer", "kept_reference", "kept", "both", "shared",
                                       "identical"])


def overlap_summary(per_layer: pd.DataFrame) -> pd.DataFrame:
    """Per method, in percent: the mean and least ``shared`` over contexts and layers, and how many (context,
    layer) selections are identical to the reference's (``k/n``: 99.99% shared still says whether any differ)."""
    g = per_layer.groupby("method", sort=False)
    return pd.DataFrame({"kept_shared_pct": 100 * g.shared.mean(), "kept_shared_min_pct": 100 * g.shared.min(),
                         "identical_selections": g.identical.sum().astype(int).astype(str) + "/" + g.size().astype(str),
                         "overlap_contexts": g.context.nunique()})


def shared_by_layer(per_layer: pd.DataFrame) -> pd.DataFrame:
    """Methods x layers: the percent of the reference's kept tokens each method keeps too, mean over contexts."""
    table = per_layer.pivot_table(index="method", columns="layer", values="shared", sort=False)
    return (100 * table).add_prefix("layer_")
