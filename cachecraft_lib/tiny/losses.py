"""The training losses: answer-weighted next-token cross-entropy and the unlikelihood of repeated list items."""

from __future__ import annotations

import torch

from .batches import block_causal_mask


def weighted_loss(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, float]:
    """Next-token cross-entropy weighted per target token, plus the unlikelihood of repeated items when
    the batch asks for it (``avoid``); also the answer-token accuracy."""
    ids, weights = batch["input_ids"], batch["weights"]
    logits = model(input_ids=ids, attention_mask=block_causal_mask(batch["blocks"]),
                   position_ids=batch["position_ids"]).logits[:, :-1].float()
    targets = ids[:, 1:]
    w = weights[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                           reduction="none").view_as(targets)
    total = w.sum().clamp_min(1e-8)
    loss = (ce * w).sum() / total
    if "avoid" in batch:  # per target token, like the cross-entropy
        loss = loss + batch["unlikelihood"] * repeat_loss(logits, batch["avoid"][:, 1:]) / total
    answer = w == 1.0
    acc = ((logits.argmax(-1) == targets) & answer).sum().item() / max(answer.sum().item(), 1)
    return loss, acc


def repeat_loss(logits: torch.Tensor, avoid: torch.Tensor) -> torch.Tensor:
    """Sum over positions and avoided ids of ``-log(1 - p(id))`` (logits (rows, width, vocab), avoid
    (rows, width, k) padded with -1): only the few positions that have something to avoid are softmaxed."""
    where = avoid[..., 0] >= 0
    if not where.any():
        return logits.new_zeros(())
    picked, ids = logits[where], avoid[where]
    logp = picked.gather(-1, ids.clamp_min(0)) - picked.logsumexp(-1, keepdim=True)
    ul = -torch.log1p(-logp.exp().clamp(max=1 - 1e-6))
    return (ul * (ids >= 0)).sum()
