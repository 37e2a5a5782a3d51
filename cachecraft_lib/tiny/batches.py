"""The batch of each training step, built in this process or in worker processes, and its block-causal mask."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from typing import Any

import torch

from .recipe import Recipe, stage_at
from .samples import Row, SampleStream


def make_batch(stream: SampleStream, recipe: Recipe, step: int, pad_id: int) -> dict[str, torch.Tensor]:
    """The batch of step ``step``: one length, random tasks of the current stage, right-padded. It is
    drawn from a generator seeded by the recipe's seed and ``step`` alone, so a resumed run sees exactly
    the batches a straight run would.

    ``blocks`` (0 = context, b = the b-th question block, -1 = padding) stands in for the attention
    mask, which ``block_causal_mask`` builds where the model runs: a (rows, 1, width, width) mask is
    too large to build per batch on the CPU and ship to a GPU.
    """
    rng = random.Random(recipe.seed * 1_000_003 + step)
    stage = stage_at(recipe, step)
    length = rng.choice(stage.lengths)
    tasks = [t for t in stage.tasks if stream.haystack_size(t, length) is not None]
    if not tasks:
        raise ValueError(f"no task of the stage fits {length} tokens; raise the stage's lengths")
    rows: list[Row] = []
    while sum(len(r.ids) for r in rows) < recipe.batch_tokens or not rows:
        rows.append(stream.sample(stage.pick_task(tasks, rng), length, rng, dense_qa=stage.dense_qa,
                                  ordered_sets=stage.ordered_sets, set_orders=stage.set_orders,
                                  repeats=stage.unlikelihood > 0))
    width = max(len(r.ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    weights = torch.zeros((len(rows), width))
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    blocks = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r.ids)
        ids[i, :n] = torch.tensor(r.ids)
        w = torch.tensor(r.weights)
        weights[i, :n] = torch.where(w > 0, w, torch.full_like(w, recipe.context_loss_weight))
        positions[i, :n] = torch.tensor(r.positions)
        positions[i, n:] = torch.arange(width - n) + (r.positions[-1] + 1)
        blocks[i, :n] = torch.tensor(r.blocks)
    batch = {"input_ids": ids, "weights": weights, "position_ids": positions, "blocks": blocks}
    if stage.unlikelihood > 0:
        batch["avoid"] = avoid_tensor(rows, width)
        batch["unlikelihood"] = torch.tensor(stage.unlikelihood)
    return batch


def avoid_tensor(rows: list[Row], width: int) -> torch.Tensor:
    """(rows, width, k) token ids each position should not predict (``Row.avoid``), padded with -1."""
    k = max((len(v) for r in rows for v in r.avoid.values()), default=1)
    out = torch.full((len(rows), width, k), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        for pos, toks in r.avoid.items():
            out[i, pos, :len(toks)] = torch.tensor(toks)
    return out


def block_causal_mask(blocks: torch.Tensor) -> torch.Tensor:
    """Additive 4D mask (rows, 1, width, width), on ``blocks``' device: causal, and a question block sees
    the context and itself only; padding (no loss on it) sees the context and itself."""
    width = blocks.shape[1]
    q_idx = torch.arange(width, device=blocks.device)
    causal = q_idx[None, :] <= q_idx[:, None]
    same = (blocks[:, None, :] == 0) | (blocks[:, None, :] == blocks[:, :, None])
    allowed = causal[None] & (same | (blocks[:, :, None] < 0) & (q_idx[None, None, :] == q_idx[None, :, None]))
    return torch.zeros(allowed.shape, device=blocks.device).masked_fill_(~allowed, float("-inf"))[:, None]


class StepBatches(torch.utils.data.Dataset):
    """Map-style dataset whose item ``s`` is the batch of step ``s``: worker processes can build batches
    ahead of the model (a GPU outruns one CPU core's data generation) and still deliver exactly the
    batches a single process would, in order."""

    def __init__(self, tokenizer: Any, recipe: Recipe) -> None:
        self.tokenizer, self.recipe = tokenizer, recipe
        self._stream: SampleStream | None = None  # built in each worker, with its own haystack-size cache

    def __len__(self) -> int:
        return self.recipe.steps

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        if self._stream is None:
            self._stream = SampleStream(self.tokenizer, self.recipe.seed)
        return make_batch(self._stream, self.recipe, step, self.tokenizer.pad_token_id)


def step_batches(tokenizer: Any, recipe: Recipe, first: int, workers: int = 0,
                 pin_memory: bool = False) -> Iterable[dict[str, torch.Tensor]]:
    """The batches of steps ``first`` .. ``recipe.steps - 1`` in order, built by ``workers`` processes
    (0: in this one)."""
    dataset = StepBatches(tokenizer, recipe)
    if workers <= 0:
        return (dataset[s] for s in range(first, recipe.steps))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the tokenizer is used in forked workers
    return torch.utils.data.DataLoader(dataset, batch_size=None, sampler=range(first, recipe.steps),
                                       num_workers=workers, prefetch_factor=4, pin_memory=pin_memory)
