"""A submission's ``decode`` hook as a decode-time method of the capped generator (board C).

``submission_cap_method(sub)`` is a ``decoding.CapMethod`` whose ``select`` sends the method, in its sandbox
(the same long-lived child as the prefill hooks: ``press.sandbox_for``), one layer's keys and values after
RoPE, the last ``window`` queries each rotated at its own position, every cached entry's position and the
budget (``cap - incoming``), and validates the answer here (``MethodSandbox.decode``). ``CappedGenerator``
applies it before the forward, so the cap is enforced by the harness on the cache tensors, not trusted to
the method.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpress.utils import get_prerope_query_states

from ..decoding.capped import CapMethod, LayerRecord
from ..methods.attention import rotate
from .submissions.folder import Submission, SubmissionError
from .submissions.press import sandbox_for
from .submissions.sandbox import Limits

DECODE_WINDOW = 8


def layer_arrays(module: Any, keys: torch.Tensor, values: torch.Tensor, record: LayerRecord, row: int) -> dict:
    """The ``method_api.Layer`` arrays of batch row ``row``: keys, values, rotated window queries, positions."""
    query = rotate(get_prerope_query_states(module, record.hidden), (record.cos, record.sin))
    return {"keys": keys[row].float().cpu().numpy(), "values": values[row].float().cpu().numpy(),
            "queries": query[row].float().cpu().numpy(), "positions": record.positions[row].cpu().numpy()}


def submission_cap_method(sub: Submission, window: int = DECODE_WINDOW, **limits: Any) -> CapMethod:
    """The submission's ``decode`` as a ``CapMethod`` (sandboxed; its answers validated outside it)."""
    if not sub.decode:
        raise SubmissionError("bad_method", f"{sub.name}: class Method defines no decode(layer), which board C "
                                            "calls when the cap overflows")
    limits_ = Limits.of(**limits)
    n_layers: list[int] = []

    def select(module, keys: torch.Tensor, values: torch.Tensor, record: LayerRecord, n_keep: int) -> torch.Tensor:
        box = sandbox_for(sub, limits_)
        if not n_layers:
            n_layers.append(int(module.config.num_hidden_layers))
        layer = int(getattr(module, "layer_idx", 0))
        rows = []
        for b in range(keys.shape[0]):
            try:
                kept = box.decode(layer_arrays(module, keys, values, record, b), budget=int(n_keep), layer=layer,
                                  n_layers=n_layers[0], compression_ratio=float(1 - n_keep / keys.shape[2]))
            except SubmissionError as err:
                raise SubmissionError(err.kind, f"decode, {str(err).split(': ', 1)[-1]}") from None
            rows.append(kept)
        if len({r.shape[1] for r in rows}) > 1:
            raise SubmissionError("bad_output", f"decode() kept {[r.shape[1] for r in rows]} entries in the batch's "
                                                "rows; keep the same number in every row")
        return torch.from_numpy(np.stack(rows)).to(keys.device)

    return CapMethod(sub.name, None, window=window, select=select)
