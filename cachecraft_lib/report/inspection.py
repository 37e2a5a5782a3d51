"""Look inside one prefill: per-layer feature contexts, where a needle sits, what a policy keeps.

Used by notebooks 01 and 02 so they stay short; everything here reuses the press machinery. The prefill is
the one the grid scores, built by KVPress's own ``preprocess``: with a chat template (every instruct model)
the template's header comes first, so token positions count it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..methods import frc
from ..methods.features import FEATURES, FeatureContext, layer_contexts
from ..methods.policy import SelectionError, validate_selection
from ..models.prefill import SharedPrefill


@dataclass
class LayerView:
    """One layer of one prefill: the tail attention, its feature context and FRC's kept indices."""

    layer: int
    attn: torch.Tensor
    ctx: FeatureContext
    frc_kept: np.ndarray


def context_ids(tokenizer: Any, context: str) -> torch.Tensor:
    """The prefill ids exactly as KVPress's pipeline builds them (its own ``preprocess``, untruncated as in the
    grid): ``bos + context`` without a chat template, the template's header then the context with one."""
    from kvpress import KVPressTextGenerationPipeline

    # preprocess reads nothing of the pipeline but its tokenizer, so a stand-in spares loading a model
    ids = KVPressTextGenerationPipeline.preprocess(SimpleNamespace(tokenizer=tokenizer), context, [""], "",
                                                   max_context_length=10**9)
    return ids["context_ids"]


def prefill_text(tokenizer: Any, context: str) -> tuple[str, int]:
    """The prefill as text, split from the question as KVPress's ``preprocess`` splits it, and where the context
    starts in it (its character 0; a template that trims the context's leading whitespace shifts it back)."""
    if tokenizer.chat_template is None:
        head = getattr(tokenizer, "bos_token", "") or ""
        return head + context, len(head)
    separator = "#" * (len(context) + 10)
    text = tokenizer.apply_chat_template([{"role": "user", "content": context + separator}],
                                         add_generation_prompt=True, tokenize=False, enable_thinking=False)
    text = text.split(separator)[0]
    for body in (context, context.lstrip()):
        if text.endswith(body):
            return text, len(text) - len(body) - (len(context) - len(body))
    raise ValueError("the chat template rewrites the context, so its tokens cannot be located in the prefill")


def inspect_prefill(model: Any, tokenizer: Any, context: str, compression_ratio: float = 0.88,
                    n_queries: int = 64, window: int = 32, chunk_length: int = 20) -> list[LayerView]:
    """Prefill ``context`` once and return every layer's tail attention, features and FRC selection."""
    shared = SharedPrefill(model, context_ids(tokenizer, context))
    views = []
    for attn, ctx in layer_contexts(shared.layers, compression_ratio, n_queries, window, chunk_length):
        kept = frc.chunk_top_k(frc.frc_token_scores(attn, window), compression_ratio, chunk_length)
        views.append(LayerView(ctx.layer, attn.cpu(), ctx, kept.cpu().numpy()))
    return views


def token_span(tokenizer: Any, context: str, substring: str) -> tuple[int, int]:
    """[start, end) positions of ``substring`` (its first occurrence) in the prefill of ``context`` as the grid
    scores it: after bos, or after the chat template's header (system turn and user header) when there is one."""
    start_char = context.find(substring)
    if start_char < 0:
        raise ValueError(f"{substring!r} is not in the context")
    text, offset = prefill_text(tokenizer, context)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if enc["input_ids"] != context_ids(tokenizer, context)[0].tolist():
        raise RuntimeError("the prefill text does not tokenize to KVPress's prefill ids; spans would be misplaced")
    lo, hi = offset + start_char, offset + start_char + len(substring)
    toks = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > lo and a < hi]
    return toks[0], toks[-1] + 1


def features_frame(view: LayerView) -> pd.DataFrame:
    """The 17 features of one layer as a DataFrame indexed by token position."""
    return pd.DataFrame({name: view.ctx.features[name] for name in FEATURES})


def mean_feature_correlation(views: list[LayerView], method: str = "spearman") -> pd.DataFrame:
    """Feature-feature correlation averaged over layers (constant features give NaN and are dropped)."""
    mats = [features_frame(v).corr(method=method) for v in views]
    mean = sum(mats) / len(mats)
    return mean.dropna(how="all").dropna(axis=1, how="all")


def kept_share(kept: np.ndarray, span: tuple[int, int]) -> float:
    """Share of the span's tokens that a selection keeps."""
    lo, hi = span
    return float(np.isin(np.arange(lo, hi), kept).mean())


def frc_breakdown(view: LayerView, weights=frc.FRC_WEIGHTS, window: int = 32) -> pd.DataFrame:
    """FRC step by step for one layer: raw signals, MaxAbs-normalised signals, token and chunk scores."""
    sig = frc.frc_signals(view.attn, window)
    out = pd.DataFrame({f"{k}_raw": sig[k].numpy() for k in ("local", "density", "maxhead")})
    for k in ("local", "density", "maxhead"):
        out[f"{k}_norm"] = frc.maxabs(sig[k]).numpy()
    out["score"] = frc.frc_token_scores(view.attn, window, weights).numpy()
    chunks = frc.chunk_scores(torch.as_tensor(out["score"].values), view.ctx.chunk_length).numpy()
    out["chunk"] = np.arange(len(out)) // view.ctx.chunk_length
    out["chunk_score"] = chunks[out["chunk"].values]
    out["kept"] = np.isin(np.arange(len(out)), view.frc_kept)
    return out


def validator_cases(length: int, ratio: float, chunk_length: int = 20) -> pd.DataFrame:
    """Each kind of bad selection, run through the validator: the invariant it breaks and the message."""
    k = frc.n_kept_tokens(length, ratio)
    good = np.arange(k)
    cases = {
        "valid tokenwise top-K": good,
        "keep everything (dropped [-k:] slice)": np.arange(length),
        "one token short": good[:-1],
        "duplicate index": np.r_[good[:-1], good[0]],
        "index out of range": np.r_[good[:-1], length],
        "negative index": np.r_[good[:-1], -1],
        "float indices": good.astype(np.float32),
        "2-D array": good[: k - k % 2].reshape(2, -1) if k > 1 else good.reshape(1, 1),
        "partial chunk": np.r_[np.arange(chunk_length), np.arange(chunk_length + 5, chunk_length + 10)],
    }
    rows = []
    for name, idx in cases.items():
        try:
            validate_selection(idx, length, ratio, chunk_length)
            rows.append({"selection": name, "accepted": True, "invariant": "", "message": ""})
        except SelectionError as err:
            rows.append({"selection": name, "accepted": False, "invariant": err.invariant, "message": str(err)})
    return pd.DataFrame(rows)


def scorer_kept_by_layer(model: Any, tokenizer: Any, context: str, press: Any) -> list[torch.Tensor]:
    """Prefill ``context`` once and return, per layer, the positions a KVPress ``ScorerPress`` keeps in each
    KV head (query-agnostic, as in the grid), shape (H_kv, n_kept): its top int(L * (1 - ratio)) scores."""
    from kvpress import ScorerPress

    if not isinstance(press, ScorerPress):
        raise TypeError(f"{type(press).__name__} is not a KVPress ScorerPress (one score per token and head); "
                        "chunked presses such as FRC and ChunkKV are inspected with inspect_prefill instead")
    kept = []
    for scores in SharedPrefill(model, context_ids(tokenizer, context)).scores_for(press):
        n_kept = int(scores.shape[-1] * (1 - press.compression_ratio))
        kept.append(scores[0].topk(n_kept, dim=-1).indices.cpu())
    return kept


def scorer_needle_kept(model: Any, tokenizer: Any, data: pd.DataFrame, press: Any) -> pd.DataFrame:
    """Share of each sample's first answer (its needle value) that a scorer press keeps, per layer (mean
    over KV heads), with the needle's depth in the context. A model whose context-only attention marks
    needles, as real LLMs' does, keeps them at mild compression; one that ignores them until the question
    comes loses them even at r = 0.25. Rows are one (sample, layer); ``data`` is in KVPress's schema."""
    rows = []
    for i, row in enumerate(data.itertuples()):
        lo, hi = token_span(tokenizer, row.context, list(row.answer)[0])
        length = context_ids(tokenizer, row.context).shape[1]
        for layer, idx in enumerate(scorer_kept_by_layer(model, tokenizer, row.context, press)):
            share = np.mean([kept_share(h.numpy(), (lo, hi)) for h in idx])
            rows.append({"sample": i, "task": row.task, "depth": round(lo / length, 2), "layer": layer,
                         "kept": float(share)})
    return pd.DataFrame(rows)
