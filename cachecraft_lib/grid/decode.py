"""Batched greedy decoding of many compressed caches at once: every cell of a sample in one batch.

Why: after one shared prefill, answering is what costs. KVPress's pipeline decodes one cache at a time, one
forward per token; a grid sample has up to 31 caches (method x ratio) of the same context, so this module
decodes them together. Each row keeps exactly what its press kept:

- caches of different lengths, and of different lengths per layer (PyramidKV, a short last chunk kept in some
  layers only), are zero-padded per layer and masked by a per-layer attention mask (a pre-hook on every
  attention module swaps in that layer's mask, so no single layer-0 mask is forced on all layers);
- head-wise presses (AdaKV, ExpectedAttention) leave KVPress's fake-key indices ``(batch, head, seq)`` on the
  attention modules; here they become an exact per-head mask of the row instead of fake keys, so the question
  can be fed in one batched forward (KVPress's fake-key search fails for many queries at once on a small model);
- positions continue from each row's own start (the original context length, as KVPress's pipeline does, or
  the compressed length for presses that re-rotate keys), the question is fed as one batched forward (rows of
  different question lengths right-padded and masked), and each row stops at its own eos or
  ``max_new_tokens`` with KVPress's rule (the first token is never checked for eos); finished rows leave
  the batch once ``SHRINK_AT`` of it has finished (dropping rows copies the batch's cache, so not at every step).

The cache is preallocated for the whole answer (no copy per token), and attention runs through
``_grouped_sdpa``, which stacks each KV group's query heads instead of repeating the keys per group
(transformers' sdpa copies the whole cache per group whenever a mask is given).

The attention mask needs sdpa or eager attention (flash attention takes no 4D mask): the grid falls back to
decoding cell by cell there. A row with ``tokenwise=True`` (the runner sets it from the method in reduced
precision: ``runner._GroupRunner.question_feed``), or every row with ``tokenwise_question=True``, has its question
fed one token at a time instead, in batches of such rows only.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from .preallocated import PreallocatedLayer

WIDTH_SLACK = 1.125  # decode_by_width: a loop's widest cache at most this many times its narrowest
SHRINK_AT = 0.25  # the finished share of a batch at which its finished rows leave it
RESERVE_BYTES = 1 << 30  # free CUDA memory a decode leaves untouched (allocator slack, logits, the next prefill)


@dataclass
class CacheRow:
    """One compressed cache to answer from: per-layer keys/values (1, H_kv, L_l, D), optional head masks."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    masked: list[torch.Tensor | None]  # per layer (H_kv, L_l) bool, True = evicted by a head-wise press
    question_ids: torch.Tensor  # (1, n)
    start: int  # position id of the first question token
    max_new_tokens: int
    tokenwise: bool = False  # feed this row's question token by token (its method's feed; the runner decides)

    @classmethod
    def from_cache(cls, model: Any, cache: Any, question_ids: torch.Tensor, start: int,
                   max_new_tokens: int) -> CacheRow:
        """Take a DynamicCache and the head masks a press left on the attention modules (which are cleared)."""
        keys, values, masked = [], [], []
        for layer, attn in zip(cache.layers, attention_modules(model), strict=True):
            keys.append(layer.keys)
            values.append(layer.values)
            masked.append(_head_mask(attn, layer.keys))
            attn.masked_key_indices = None
        return cls(keys, values, masked, question_ids.reshape(1, -1), int(start), int(max_new_tokens))

    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() * 2 for k in self.keys)


def attention_modules(model: Any) -> list[Any]:
    return [layer.self_attn for layer in model.model.layers]


def _head_mask(module: Any, keys: torch.Tensor) -> torch.Tensor | None:
    """KVPress's ``masked_key_indices`` of batch row 0 as an (H_kv, L) bool mask, or None."""
    indices = getattr(module, "masked_key_indices", None)
    if indices is None:
        return None
    batch, head, seq = indices
    mask = torch.zeros(keys.shape[1], keys.shape[2], dtype=torch.bool, device=keys.device)
    mask[head[batch == 0], seq[batch == 0]] = True
    return mask


def _grouped_sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                  **kwargs: Any) -> tuple[torch.Tensor, None]:
    """sdpa with the query heads of each KV group stacked as extra queries, so keys are never repeated per
    group (transformers' sdpa copies the whole cache per group whenever a mask is given)."""
    b, heads, q, d = query.shape
    kv = key.shape[1]
    stacked = query.reshape(b, kv, (heads // kv) * q, d)
    out = torch.nn.functional.scaled_dot_product_attention(stacked, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling)
    return out.reshape(b, heads, q, d).transpose(1, 2).contiguous(), None


_GROUPED = "cachecraft_grouped_sdpa"


@contextmanager
def grouped_attention(model: Any):
    """Run the model's attention through ``_grouped_sdpa`` for the duration (sdpa or eager models only)."""
    from transformers import AttentionInterface

    AttentionInterface.register(_GROUPED, _grouped_sdpa)
    before = model.config._attn_implementation
    if before not in ("sdpa", "eager", _GROUPED):
        raise ValueError(f"batched decoding needs sdpa or eager attention, the model uses {before!r}")
    model.config._attn_implementation = _GROUPED
    try:
        yield
    finally:
        model.config._attn_implementation = before


def stop_ids(model: Any) -> set[int]:
    stop = model.generation_config.eos_token_id
    return set(stop if isinstance(stop, list) else [stop]) - {None}


def row_bytes(rows: list[CacheRow]) -> int:
    """What one row of a batch of ``rows`` costs in a ``_BatchDecoder``: its cache padded to the batch's widest
    layer plus the question and the answer, a quarter more for what shrinking the batch copies layer by layer,
    the attention mask and the question forward's activations."""
    ref = rows[0].keys[0]
    width = max(k.shape[2] for r in rows for k in r.keys)
    capacity = width + max(r.question_ids.shape[1] for r in rows) + max(r.max_new_tokens for r in rows)
    padded = 2 * len(rows[0].keys) * ref.shape[1] * capacity * ref.shape[3]
    return int(1.25 * padded * ref.element_size())


def default_batch_size(rows: list[CacheRow], device: torch.device) -> int:
    """How many rows to decode together: on CUDA what the free memory holds, less ``RESERVE_BYTES``
    (``row_bytes`` per row); on CPU every row."""
    if device.type != "cuda" or not rows:
        return max(1, len(rows))
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(len(rows), int(max(0, free - RESERVE_BYTES) // row_bytes(rows))))


def decode_rows(model: Any, tokenizer: Any, rows: list[CacheRow], batch_size: int | None = None,
                tokenwise_question: bool = False) -> list[str]:
    """The greedy answer of every row, decoded ``batch_size`` rows at a time (rows sorted by cache size).

    Rows whose question is fed token by token (``row.tokenwise``, or every row with ``tokenwise_question``) are
    decoded in batches of their own, so that a row's feed never depends on the rows it is batched with."""
    if not rows:
        return []
    size = batch_size or default_batch_size(rows, model.device)
    answers: list[str] = [""] * len(rows)
    for tokenwise in (False, True):
        same_feed = [i for i, r in enumerate(rows) if (tokenwise_question or r.tokenwise) == tokenwise]
        order = sorted(same_feed, key=lambda i: rows[i].nbytes())
        for begin in range(0, len(order), size):
            chunk = order[begin:begin + size]
            for i, text in zip(chunk, _BatchDecoder(model, [rows[i] for i in chunk]).run(tokenizer, tokenwise),
                               strict=True):
                answers[i] = text
    return answers


def decode_by_width(model: Any, tokenizer: Any, rows: list[CacheRow], batch_size: int | None = None) -> list[str]:
    """``decode_rows`` on rows of similar cache widths (the widest layer of a row) together: a loop costs its rows
    x its widest cache plus a fixed cost per step, so rows are sorted by width and cut into loops of at most
    ``batch_size`` rows whose widths stay within ``WIDTH_SLACK`` of the loop's narrowest (the contexts of a board
    differ by a few tokens: one loop per budget, not one per context)."""
    widths = [max(k.shape[2] for k in row.keys) for row in rows]
    loops: list[list[int]] = []
    for i in sorted(range(len(rows)), key=lambda i: widths[i]):
        if not loops or widths[i] > WIDTH_SLACK * widths[loops[-1][0]] or len(loops[-1]) == (batch_size or -1):
            loops.append([])
        loops[-1].append(i)
    answers: list[str] = [""] * len(rows)
    for members in loops:
        for i, text in zip(members, decode_rows(model, tokenizer, [rows[i] for i in members], batch_size),
                           strict=True):
            answers[i] = text
    return answers


class _BatchDecoder:
    """One batch: the padded, preallocated cache, an additive mask per layer of what each row may see, and
    the greedy loop. Attention runs through ``grouped_attention`` (no copy of the cache per KV group)."""

    def __init__(self, model: Any, rows: list[CacheRow]) -> None:
        from transformers import Cache

        self.model, self.rows = model, rows
        self.device = model.device
        self.groups = model.config.num_attention_heads // model.config.num_key_value_heads
        self.width = max(k.shape[2] for r in rows for k in r.keys)  # every layer padded to the widest
        capacity = self.width + max(r.question_ids.shape[1] for r in rows) + max(r.max_new_tokens for r in rows)
        per_head = any(m is not None for r in rows for m in r.masked)
        layers, self.valid = [], []  # per layer (B, H_kv or 1, capacity) bool: the slots a row may attend to
        for layer in range(len(rows[0].keys)):
            ref = rows[0].keys[layer]
            shape = (len(rows), ref.shape[1], capacity, ref.shape[3])
            keys = torch.zeros(shape, dtype=ref.dtype, device=self.device)
            values = torch.zeros(shape, dtype=ref.dtype, device=self.device)
            valid = torch.zeros(len(rows), ref.shape[1] if per_head else 1, capacity, dtype=torch.bool,
                                device=self.device)
            for b, r in enumerate(rows):
                n = r.keys[layer].shape[2]
                keys[b, :, :n] = r.keys[layer][0]
                values[b, :, :n] = r.values[layer][0]
                valid[b, :, :n] = True
                if r.masked[layer] is not None:
                    valid[b, :, :n] &= ~r.masked[layer].to(self.device)
            layers.append(PreallocatedLayer(keys, values, self.width))
            self.valid.append(valid)
        self.cache = Cache(layers=layers)
        self.offset = self.width

    # ------------------------------------------------------------------------------ one forward pass
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """Feed (B, q) tokens at ``positions``; ``real`` (B, q) marks padding. Returns hidden states (B, q, d)."""
        q = input_ids.shape[1]
        for valid in self.valid:
            valid[:, :, self.offset:self.offset + q] = real[:, None, :]
        hooks = [attn.register_forward_pre_hook(self._mask_hook(valid, q), with_kwargs=True)
                 for valid, attn in zip(self.valid, attention_modules(self.model), strict=True)]
        try:
            with grouped_attention(self.model):
                out = self.model.model(input_ids=input_ids, position_ids=positions, past_key_values=self.cache,
                                       cache_position=self.offset + torch.arange(q, device=self.device),
                                       use_cache=True)
        finally:
            for hook in hooks:
                hook.remove()
        self.offset += q
        return out.last_hidden_state

    def _mask_hook(self, valid: torch.Tensor, q: int):
        """A forward pre-hook that gives one attention layer its own mask, built only when the layer runs."""
        def hook(module, args, kwargs):
            kwargs["attention_mask"] = self._layer_mask(valid, q)
            return args, kwargs
        return hook

    def _layer_mask(self, valid: torch.Tensor, q: int) -> torch.Tensor:
        """Boolean (B, H_kv or 1, groups * q, capacity) for ``grouped_attention``: a slot is seen when the row
        may see it and it is not later than the query. One new token needs no causal part (later slots are
        not filled yet), so decoding steps get a view, not a copy."""
        valid = valid[:, :, :self.offset + q]
        if q == 1:
            return valid[:, :, None, :]
        rank = torch.arange(valid.shape[2], device=self.device)
        earlier = rank[None, :] <= (self.offset + torch.arange(q, device=self.device))[:, None]  # (q, capacity)
        mask = valid[:, :, None, :] & earlier[None, None]
        b, m = mask.shape[:2]
        return mask[:, :, None].expand(b, m, self.groups, q, mask.shape[-1]).reshape(b, m, self.groups * q, -1)

    # ------------------------------------------------------------------------------------ the loop
    def run(self, tokenizer: Any, tokenwise_question: bool) -> list[str]:
        with torch.no_grad():
            first = self._question(tokenwise_question)
            return self._generate(tokenizer, first)

    def _question(self, tokenwise: bool) -> torch.Tensor:
        """Feed every row's question; the first greedy token of each row (B,)."""
        lengths = [r.question_ids.shape[1] for r in self.rows]
        width = max(lengths)
        pad = self._pad_id()
        ids = torch.full((len(self.rows), width), pad, dtype=torch.long, device=self.device)
        for b, r in enumerate(self.rows):
            ids[b, :lengths[b]] = r.question_ids[0].to(self.device)
        starts = torch.tensor([r.start for r in self.rows], device=self.device)
        positions = starts[:, None] + torch.arange(width, device=self.device)[None]
        real = torch.arange(width, device=self.device)[None] < torch.tensor(lengths, device=self.device)[:, None]
        if tokenwise:
            hidden = torch.cat([self.forward(ids[:, j:j + 1], positions[:, j:j + 1], real[:, j:j + 1])
                                for j in range(width)], dim=1)
        else:
            hidden = self.forward(ids, positions, real)
        last = hidden[torch.arange(len(self.rows)), torch.tensor(lengths, device=self.device) - 1]
        self.next_position = starts + torch.tensor(lengths, device=self.device)
        return self._logits(last).argmax(-1)

    def _generate(self, tokenizer: Any, first: torch.Tensor) -> list[str]:
        """Greedy decoding with KVPress's stopping rule; finished rows leave the batch once ``SHRINK_AT`` of it
        has finished."""
        stop = stop_ids(self.model)
        generated = [[int(t)] for t in first.tolist()]
        budget = [r.max_new_tokens for r in self.rows]
        alive = list(range(len(self.rows)))  # batch position -> row
        step = 0
        while True:
            running = [j for j, b in enumerate(alive) if len(generated[b]) < budget[b]
                       and (len(generated[b]) == 1 or generated[b][-1] not in stop)]
            if not running:
                break
            if len(alive) - len(running) >= max(1, SHRINK_AT * len(alive)):
                self._keep(running)
                alive = [alive[j] for j in running]
            tokens = torch.tensor([[generated[b][-1]] for b in alive], device=self.device)
            positions = (self.next_position + step)[:, None]
            real = torch.ones(len(alive), 1, dtype=torch.bool, device=self.device)
            new = self._logits(self.forward(tokens, positions, real)[:, -1]).argmax(-1).tolist()
            step += 1
            for b, token in zip(alive, new, strict=True):
                if len(generated[b]) < budget[b] and (len(generated[b]) == 1 or generated[b][-1] not in stop):
                    generated[b].append(int(token))
        return [str(tokenizer.decode(g, skip_special_tokens=True)) for g in generated]

    def _keep(self, positions: list[int]) -> None:
        """Drop finished rows from the batch (their cache, mask and positions)."""
        idx = torch.tensor(positions, device=self.device)
        for layer in self.cache.layers:
            layer.keys, layer.values = layer.keys.index_select(0, idx), layer.values.index_select(0, idx)
        self.valid = [v.index_select(0, idx) for v in self.valid]
        self.next_position = self.next_position.index_select(0, idx)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.get_output_embeddings()(hidden)

    def _pad_id(self) -> int:
        pad = self.model.config.pad_token_id
        if pad is None:
            pad = next(iter(stop_ids(self.model)), 0)
        return int(pad)

