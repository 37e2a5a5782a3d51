"""Fit kvprior's ridge regression on a board's DEV items and write its params.npz (never the test split).

kvprior scores a cached entry by the attention it is predicted to receive over the rest of the trace, from
features RoPE does not change: the value vector and the norm of each rotated pair of key dimensions (RoPE turns
dimensions i and i + D/2 together, so their joint norm is the same at every position). The trace of a dev context
is the context followed by its first question, prefilled whole by the board's model; the target of entry j is
the log of the attention it gets from queries at least ``horizon`` tokens later (averaged over those queries and
the KV group's query heads, times the number of visible keys, so uniform attention is 1). One ridge per layer
and KV head, on standardised features.

    python cachecraft_lib/arena/examples/kvprior/fit.py --profile cpu --board C
    python cachecraft_lib/arena/examples/kvprior/fit.py --help

This is the author's trusted script, run outside the sandbox; the submission (method.py) only reads the arrays.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
HORIZON = 128  # board C's chunk: the attention an entry gets after the next eviction, not the next few tokens
LAMBDA = 1.0  # ridge penalty on standardised features
EPS = 1e-3  # floor of the normalised attention before the log


def features(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(H, L, D + D/2) position-free features of each entry: its value, and its key's rotated-pair norms."""
    half = keys.shape[-1] // 2
    pairs = np.sqrt(keys[..., :half] ** 2 + keys[..., half:] ** 2)
    return np.concatenate([values, pairs], axis=-1).astype(np.float32)


def long_horizon_target(queries: np.ndarray, keys: np.ndarray, horizon: int) -> np.ndarray:
    """(H_kv, L - horizon) log normalised attention each entry receives from the queries ``horizon`` or more
    tokens after it (causal softmax over the keys each query sees; query heads averaged per KV group)."""
    h_q, n, d = queries.shape
    groups = h_q // keys.shape[0]
    k = np.repeat(keys, groups, axis=0)
    logits = queries @ k.transpose(0, 2, 1) / np.sqrt(d)
    logits = np.where(np.tril(np.ones((n, n), dtype=bool)), logits, -np.inf)
    attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    attn *= np.arange(1, n + 1, dtype=np.float32)[None, :, None]  # uniform attention over the visible keys = 1
    far = np.tril(np.ones((n, n), dtype=bool), k=-horizon)  # query i, key j with i - j >= horizon
    peak = (attn * far).max(axis=1)  # (H_q, n): the most any far query attends the key (KVzip's max)
    peak = peak.reshape(keys.shape[0], groups, n).max(axis=1)
    return np.log(peak[:, : n - horizon] + EPS)


def trace(model: Any, ids: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per layer: (queries after RoPE (H_q, T, D), keys after RoPE (H_kv, T, D), values (H_kv, T, D))."""
    from transformers import DynamicCache

    from cachecraft_lib.arena.submissions.press import window_queries

    seen: dict[int, np.ndarray] = {}

    def record(module, args, kwargs, output):
        hidden = kwargs["hidden_states"]
        seen[int(module.layer_idx)] = window_queries(module, hidden, kwargs, hidden.shape[1])[0].float().numpy()

    hooks = [layer.self_attn.register_forward_hook(record, with_kwargs=True) for layer in model.model.layers]
    cache = DynamicCache()
    try:
        with torch.no_grad():
            model.model(input_ids=ids, past_key_values=cache)
    finally:
        for hook in hooks:
            hook.remove()
    return [(seen[i], cache.layers[i].keys[0].float().numpy(), cache.layers[i].values[0].float().numpy())
            for i in range(len(model.model.layers))]


def dev_traces(profile: str, board_name: str, root: Path | None = None) -> tuple[list, list[str]]:
    """The traces of the board's DEV contexts (public seeds; no secret is read) and the items they came from."""
    from kvpress.pipeline import KVPressTextGenerationPipeline

    from cachecraft_lib.arena.arena import Arena

    arena = Arena(profile, root, progress=False)
    board = arena.board(board_name)
    model, tokenizer = arena.model(board)
    items = arena.items(board, "dev")
    if items.attrs.get("split") != "dev":
        raise RuntimeError("kvprior is fitted on dev items only")
    traces = []
    for _, group in items.groupby("context_id", sort=False):
        first = group.iloc[0]
        ids = KVPressTextGenerationPipeline.preprocess(SimpleNamespace(tokenizer=tokenizer), first.context,
                                                       [first.question], first.answer_prefix,
                                                       max_context_length=10**9)
        traces.append(trace(model, torch.cat([ids["context_ids"], ids["questions_ids"][0]], dim=1)))
    return traces, list(items.item)


def ridge(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """(weights, bias, feature means, feature scales) of a ridge fit on standardised features."""
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = (x - mu) / sd
    w = np.linalg.solve(z.T @ z + lam * np.eye(z.shape[1]), z.T @ (y - y.mean()))
    return w, float(y.mean()), mu, sd


def fit(traces: list, horizon: int = HORIZON, lam: float = LAMBDA) -> dict[str, np.ndarray]:
    """The params.npz arrays: ``w``, ``mu``, ``sd`` (n_layers, H_kv, F) and ``b`` (n_layers, H_kv), float32,
    plus ``r2`` (n_layers, H_kv), each ridge's in-sample fit (for the DESCRIPTION, not used by the method)."""
    n_layers, heads = len(traces[0]), traces[0][0][1].shape[0]
    out = {name: [] for name in ("w", "b", "mu", "sd", "r2")}
    for layer in range(n_layers):
        xs, ys = [], []
        for t in traces:
            q, k, v = t[layer]
            if k.shape[1] <= horizon:
                continue
            xs.append(features(k, v)[:, : k.shape[1] - horizon])
            ys.append(long_horizon_target(q, k, horizon))
        x, y = np.concatenate(xs, axis=1), np.concatenate(ys, axis=1)
        rows = [ridge(x[h], y[h], lam) for h in range(heads)]
        for name, i in (("w", 0), ("b", 1), ("mu", 2), ("sd", 3)):
            out[name].append([r[i] for r in rows])
        pred = [((x[h] - r[2]) / r[3]) @ r[0] + r[1] for h, r in enumerate(rows)]
        out["r2"].append([1 - np.var(y[h] - pred[h]) / np.var(y[h]) for h in range(heads)])
    return {name: np.asarray(a, dtype=np.float32) for name, a in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fit kvprior's ridge regression on a board's dev items (never "
                                                 "the test split) and write the submission's params.npz.")
    parser.add_argument("--profile", default="cpu", choices=("smoke", "cpu", "paper"),
                        help="arena profile whose board and model give the dev traces (default cpu)")
    parser.add_argument("--board", default="C", help="board whose dev items are traced (default C)")
    parser.add_argument("--horizon", type=int, default=HORIZON,
                        help=f"attention counted from queries at least this many tokens later (default {HORIZON})")
    parser.add_argument("--lam", type=float, default=LAMBDA, help=f"ridge penalty (default {LAMBDA})")
    parser.add_argument("--out", type=Path, default=HERE / "params.npz",
                        help="where to write the arrays (default: the submission's own params.npz)")
    args = parser.parse_args(argv)
    traces, items = dev_traces(args.profile, args.board)
    params = fit(traces, args.horizon, args.lam)
    np.savez(args.out, **params)
    r2 = ", ".join(f"{r:.3f}" for r in params["r2"].mean(axis=1))
    print(f"fitted on {len(traces)} dev contexts ({len(items)} items) of board {args.board} ({args.profile}); "
          f"in-sample R^2 per layer: {r2}; wrote {args.out} "
          f"({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
