"""Train the embedded default model: a tiny GQA Llama that solves offline RULER on a CPU.

The recipe is a staged curriculum over the 13 RULER tasks rendered exactly as KVPress renders a
row without a chat template (see ``render``), at mixed lengths up to the ``cpu`` profile's longest
context. Loss is weighted towards answer tokens (the context carries little signal). Data for step
``s`` is drawn from ``Random(seed, s)``, so a resumed run sees exactly the batches a straight run
would. Weights are saved with ``save_pretrained`` to the shipped folder at every checkpoint.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import re
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..atomic import atomic_write, atomic_write_text
from ..ruler.dataset import fit_haystack
from ..ruler.tasks import ENTITY_DOC, GENERATORS, QA1_QUESTIONS, TaskState
from ..ruler.templates import (
    CWE_TEMPLATE,
    NIAH_PREFIX,
    NIAH_TEMPLATE,
    TASKS,
    fill,
    niah_number,
    split_context_question,
)
from ..ruler.tokens import as_counter
from .render import answer_text, render_ids

SHIPPED_BUDGET_MB = 20.0  # weights and tokenizer of the model shipped in data/models/ (float32 safetensors)
NIAH_TASKS = tuple(t for t in TASKS if t.startswith("niah"))
# context lengths of the refine cycles from step 7400 on: more of them at the cpu profile's longer 2048
REFINE_LENGTHS = (768, 1024, 1536, 2048, 2048, 2200)


@dataclass(frozen=True)
class Stage:
    """One curriculum stage: up to step ``until`` (exclusive), which tasks, which lengths.

    ``weights`` (one per task) oversample the tasks the model still fails; ``dense_qa`` adds questions
    about the other documents of a QA context, the dense supervision that made NIAH learnable.
    ``ordered_sets`` writes answers that form a set (the values of niah_multivalue, the words of cwe)
    in the order they appear in the context: RULER's order is a shuffle the context does not show, so
    the model could only guess it, and the small model answered by repeating one item.
    ``set_orders`` adds that many more blocks asking a set-answer question again, each with the answer
    in another random order (RULER scores sets by recall, in any order): each is a context the model
    already paid for, supervised at every item to pick one not yet written: even teacher-forced, the
    step-12,200 model starts a wrong item, typically one already written, at half (cwe) to most (fwe, vt)
    of the later item positions.
    ``unlikelihood`` (a loss weight; 0 = off) adds, wherever an answer lists several items, the loss
    ``-log(1 - p)`` on each token that would continue the item being written into one already written
    (Welleck et al.'s unlikelihood training): the cross-entropy alone only says which item comes next,
    never that the one just written is wrong, and the small model kept writing it again.
    """

    until: int
    tasks: tuple[str, ...]
    lengths: tuple[int, ...]
    weights: tuple[float, ...] | None = None
    dense_qa: bool = False
    ordered_sets: bool = False
    set_orders: int = 0
    unlikelihood: float = 0.0

    def pick_task(self, tasks: list[str], rng: random.Random) -> str:
        if self.weights is None:
            return rng.choice(tasks)
        by_task = dict(zip(self.tasks, self.weights, strict=True))
        return rng.choices(tasks, weights=[by_task[t] for t in tasks])[0]


@dataclass
class Recipe:
    """Everything that defines the embedded model and its training run (saved in the model card)."""

    name: str = "tiny-ruler-llama"
    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 8
    num_kv_heads: int = 4
    intermediate_size: int = 640
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    seed: int = 1234
    steps: int = 12200
    batch_tokens: int = 4096
    lr: float = 1.5e-3
    warmup: int = 150
    lr_decay_steps: int = 12000  # cosine horizon; the base run ends earlier with a linear cooldown (WSD-style)
    cooldown: int = 900
    base_steps: int = 5000  # end of the base run (lr 0); refine cycles follow up to ``steps``
    refine_ends: tuple[int, ...] = (7400, 9200, 10000, 10800, 11600)  # refine cycles that end before ``steps`` (each anneals to 0)
    refine_lr: float = 6e-4
    refine_warmup: int = 100
    refine_cooldown: int = 500
    context_loss_weight: float = 0.1
    stages: tuple[Stage, ...] = field(default_factory=lambda: (
        # short contexts full of needles first: the copy-from-context circuit forms where the signal is dense
        Stage(1200, ("niah_multikey_2", "niah_single_1", "niah_multikey_1", "niah_multivalue"), (256, 320, 384, 512)),
        Stage(2500, NIAH_TASKS, (320, 384, 512, 768, 1024)),
        Stage(3900, TASKS, (384, 512, 768, 1024, 1536, 2048)),
        Stage(5000, TASKS, (768, 1024, 1024, 1536, 2048, 2048, 2200)),
        # refine: the tasks still failing at step 5000 up to 4x as often as single NIAH, QA with dense questions
        Stage(7400, TASKS, (768, 1024, 1024, 1536, 2048, 2048, 2200),
              weights=(0.5, 0.5, 0.5, 1.0, 1.5, 1.5, 1.5, 1.5, 2.0, 1.0, 0.5, 2.0, 2.0), dense_qa=True),
        # second refine cycle: what still failed at step 7400 (vt, cwe, qa_2, multikey_2 at 2048) most often
        Stage(9200, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 2.0, 1.0, 1.5, 1.0, 2.5, 2.5, 1.0, 1.5, 2.5), dense_qa=True),
        # third: multivalue and cwe (which repeated one item) most often. Cycles three to six were meant to
        # order set answers as the context shows them, but make_batch did not pass the flag on (found after
        # step 12,200): their batches kept RULER's order, and these stages now say what was trained
        Stage(10000, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 1.5, 3.0, 1.5, 1.5, 3.0, 1.0, 1.0, 1.5), dense_qa=True),
        # fourth: the NIAH tasks still under 90 at step 10000 (multivalue, multiquery, multikey_3) most often
        Stage(10800, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 3.5, 2.5, 1.0, 1.5, 0.75, 1.0, 1.0), dense_qa=True),
        # fifth: the list tasks (multivalue, multiquery) most often, shorter contexts so more steps fit an hour
        Stage(11600, TASKS, (512, 768, 1024, 1024, 1536, 2048),
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 3.0, 3.0, 2.0, 2.0, 1.5, 0.75, 1.0), dense_qa=True),
        # sixth: the 2048-token misses (multikey_2/3, multivalue, multiquery) and QA at the long lengths only
        Stage(12200, TASKS, (1024, 1536, 2048, 2048, 2200),
              weights=(0.5, 0.5, 1.0, 0.5, 2.0, 2.5, 2.0, 2.0, 1.5, 1.0, 1.0, 1.5, 1.5), dense_qa=True),
    ))

    def scaled(self, steps: int) -> Recipe:
        """The same recipe squeezed or stretched to ``steps`` (stage ends, cosine and cooldown in proportion)."""
        f = steps / self.steps
        stages = tuple(replace(s, until=max(1, round(s.until * f))) for s in self.stages)
        def k(n: int) -> int:
            return max(1, round(n * f))

        return replace(self, steps=steps, stages=stages, warmup=k(self.warmup), lr_decay_steps=k(self.lr_decay_steps),
                       cooldown=k(self.cooldown), base_steps=k(self.base_steps),
                       refine_ends=tuple(k(e) for e in self.refine_ends), refine_warmup=k(self.refine_warmup),
                       refine_cooldown=k(self.refine_cooldown))


def build_model(recipe: Recipe, tokenizer: Any):
    """A fresh ``LlamaForCausalLM`` with RoPE and grouped-query attention (sdpa), seeded."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=recipe.hidden_size, intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers, num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads, head_dim=recipe.hidden_size // recipe.num_heads,
        max_position_embeddings=recipe.max_position_embeddings, rope_theta=recipe.rope_theta,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, attn_implementation="sdpa")
    torch.manual_seed(recipe.seed)
    return LlamaForCausalLM(config)


class SampleStream:
    """Training sequences of any task at any length, sized once per (task, length) like RULER."""

    def __init__(self, tokenizer: Any, seed: int) -> None:
        self.tokenizer = tokenizer
        self.count = as_counter(tokenizer)
        self.seed = seed
        self._fit: dict[tuple[str, int], int | None] = {}

    def haystack_size(self, task: str, length: int) -> int | None:
        key = (task, length)
        if key not in self._fit:
            try:
                self._fit[key] = fit_haystack(task, length, self.count, self.seed)
            except ValueError:  # the task does not fit this short a length
                self._fit[key] = None
        return self._fit[key]

    def sample(self, task: str, length: int, rng: random.Random, extra_questions: int = 8,
               dense_qa: bool = False, ordered_sets: bool = False, set_orders: int = 0,
               repeats: bool = False) -> Row | None:
        """One context with its RULER question and, for NIAH, extra questions about other needles.

        Each (question, answer) block sees the context and itself only (block mask, positions
        restarting after the context), which is exactly KVPress's multi-question rendering:
        dense answer supervision without changing what the model sees at evaluation. ``repeats`` fills
        ``Row.avoid`` (see ``repeat_tokens``) for every block whose answer lists several items.
        """
        n = self.haystack_size(task, length)
        if n is None:
            return None
        n = max(1, int(n * rng.uniform(0.85, 1.0)))  # vary fill so the model sees every depth scale
        text, answers = GENERATORS[task].build(n, rng, TaskState(length, rng.randrange(1 << 30)))
        context, question, prefix = split_context_question(text, task)
        if ordered_sets and task in SET_TASKS:
            own = max(context.rfind(SET_TASKS[task]), 0)  # skip a one-shot example
            answers = in_context_order(answers, context[own:])
        qas = [(question, prefix, answers)]
        if task.startswith("niah") and extra_questions:
            qas += niah_extra_questions(context, question, rng, extra_questions)
        if task.startswith("qa") and dense_qa and extra_questions:
            qas += qa_extra_questions(context, question, prefix, rng, extra_questions)
        if set_orders and task in SHUFFLABLE_TASKS:
            qas += [(question, prefix, order) for order in other_orders(answers, set_orders, rng)]
        ctx_ids = render_ids(self.tokenizer, context, "", "")[0]
        ids, weights, blocks = list(ctx_ids), [0.0] * len(ctx_ids), [0] * len(ctx_ids)
        positions = list(range(len(ctx_ids)))
        avoid: dict[int, tuple[int, ...]] = {}
        for b, (q_text, q_prefix, q_answers) in enumerate(qas, start=1):
            answer = answer_text(task, q_answers)  # not ``text``: that is the row the context came from
            _, q, a = render_ids(self.tokenizer, "", q_text, q_prefix, answer)
            if repeats and len(q_answers) > 1:
                start = len(ids) + len(q)
                avoid |= {start + i: toks for i, toks in repeat_tokens(self.tokenizer, answer, q_answers).items()}
            ids += q + a
            weights += [0.0] * len(q) + [1.0] * len(a)
            blocks += [b] * (len(q) + len(a))
            positions += list(range(len(ctx_ids), len(ctx_ids) + len(q) + len(a)))
        return Row(ids, weights, blocks, positions, avoid)


@dataclass
class Row:
    """One training sequence: ids, loss weights, block id (0 = context) and position id per token;
    ``avoid`` maps a token's index to the ids that would repeat an earlier answer item there."""

    ids: list[int]
    weights: list[float]
    blocks: list[int]
    positions: list[int]
    avoid: dict[int, tuple[int, ...]] = field(default_factory=dict)


def repeat_tokens(tokenizer: Any, answer: str, items: list[str]) -> dict[int, tuple[int, ...]]:
    """Index in ``answer``'s tokens -> the ids that would turn the item being written there into a copy of
    an earlier item: for each earlier item, the answer is tokenised again with that item written in place
    of the current one, and the first token where the two differ is the one to avoid there. The true next
    token is never among them."""
    def encode(text: str) -> list[int]:  # as render_ids encodes an answer
        return tokenizer.encode(text, add_special_tokens=False)

    ids = encode(answer)
    out: dict[int, set[int]] = {}
    cursor, starts = 0, []
    for item in items:
        at = answer.find(item, cursor)
        if at < 0:  # the answer does not show this item
            continue
        cursor = at + len(item)
        for earlier in starts:
            copy = encode(answer[:at] + earlier)
            d = next((i for i, (a, b) in enumerate(zip(ids, copy, strict=False)) if a != b), None)
            if d is not None:
                out.setdefault(d, set()).add(copy[d])
        starts.append(item)
    return {i: tuple(sorted(v)) for i, v in sorted(out.items())}


# tasks RULER scores by recall of a list of several answers, in any order (string_match_all): the answer
# may be written in any order (niah_multiquery's follows its question's keys, so it is not one of them)
SHUFFLABLE_TASKS = ("niah_multivalue", "vt", "cwe", "fwe")
# tasks whose answer is an unordered set -> where their own context starts (after any one-shot example)
SET_TASKS = {"niah_multivalue": NIAH_TEMPLATE.split("{")[0], "cwe": CWE_TEMPLATE.split("\n")[0]}


def in_context_order(answers: list[str], context: str) -> list[str]:
    """``answers`` sorted by where each first appears in ``context`` as a whole word (absent ones last)."""
    def first(a: str) -> int:
        found = re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", context)
        return found.start() if found else len(context)

    return sorted(answers, key=first)


def other_orders(answers: list[str], n: int, rng: random.Random) -> list[list[str]]:
    """Up to ``n`` distinct orders of ``answers``, none the given one (fewer when there are not so many)."""
    seen, out = {tuple(answers)}, []
    limit = math.factorial(min(len(answers), 10))
    for _ in range(8 * n):
        if len(out) >= n or len(seen) >= limit:
            break
        order = rng.sample(answers, len(answers))
        if tuple(order) not in seen:
            seen.add(tuple(order))
            out.append(order)
    return out


_NEEDLE = re.compile(r"One of the special magic (numbers|uuids) for ([\w-]+) is: ([\w-]+)\.")


def niah_extra_questions(context: str, asked: str, rng: random.Random, limit: int) -> list[tuple[str, str, list[str]]]:
    """Questions, in RULER's own wording, about needles of ``context`` other than the one ``asked``."""
    by_key: dict[str, list[str]] = {}
    found = _NEEDLE.findall(context)
    for _, key, value in found:
        by_key.setdefault(key, []).append(value)
    kind = found[0][0] if found else "numbers"  # one value type per context
    keys = [k for k in by_key if k not in asked]
    out = []
    for key in rng.sample(keys, min(limit, len(keys))):
        values = by_key[key]
        singular = len(values) == 1
        template = niah_number(NIAH_TEMPLATE + NIAH_PREFIX, singular)
        text = fill(template, type_needle_v=kind[:-1] if singular else kind, context="", query=key)
        _, question, prefix = split_context_question(text, "niah_single_1")
        out.append((question, prefix, values))
    return out


def qa_extra_questions(context: str, asked: str, prefix: str, rng: random.Random,
                       limit: int) -> list[tuple[str, str, list[str]]]:
    """Single-hop questions, in the QA task's own wording, about institutions of ``context`` other than the
    one ``asked``: every document becomes a supervised retrieval, as every needle does for NIAH."""
    head = asked[: asked.rindex("Question:") + len("Question:")] if "Question:" in asked else ""
    tail = asked[asked.rindex("?") + 1:] if "?" in asked else ""  # keep the task's exact spacing
    out = []
    entities = [m for m in ENTITY_DOC.findall(context) if m[0] not in asked]
    for name, city, year, founder, product in rng.sample(entities, min(limit, len(entities))):
        values = {"city": city, "year": year, "founder": founder, "product": product}
        field_name, template = rng.choice(QA1_QUESTIONS)
        out.append((f"{head} {template.format(name=name)}{tail}", prefix, [values[field_name]]))
    return out


def _stage(recipe: Recipe, step: int) -> Stage:
    return next((s for s in recipe.stages if step < s.until), recipe.stages[-1])


def make_batch(stream: SampleStream, recipe: Recipe, step: int, pad_id: int) -> dict[str, torch.Tensor]:
    """The batch of step ``step``: one length, random tasks of the current stage, right-padded.

    ``blocks`` (0 = context, b = the b-th question block, -1 = padding) stands in for the attention
    mask, which ``block_causal_mask`` builds where the model runs: a (rows, 1, width, width) mask is
    too large to build per batch on the CPU and ship to a GPU.
    """
    rng = random.Random(recipe.seed * 1_000_003 + step)
    stage = _stage(recipe, step)
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


def train_step(model, optimizer, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, float]:
    """One optimisation step on ``batch`` (bf16 autocast on CUDA, gradients clipped to norm 1); the loss
    and answer-token accuracy before the update."""
    on_gpu = batch["input_ids"].is_cuda
    with torch.autocast("cuda" if on_gpu else "cpu", dtype=torch.bfloat16, enabled=on_gpu):
        loss, acc = weighted_loss(model, batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss, acc


def _lr(recipe: Recipe, step: int) -> float:
    """Base run: warmup, cosine over ``lr_decay_steps`` (floor 10%), then a linear cooldown to 0 at
    ``base_steps``: the run can end before the cosine horizon and still anneal. Refine cycles after it,
    ending at each of ``refine_ends`` and then at ``steps``: re-warm to ``refine_lr``, hold, cool down
    linearly to 0 (further WSD cycles, so every cycle's end is a finished model)."""
    if step >= recipe.base_steps:
        if not refine_cycles(recipe):  # the base run is the whole run, and it has ended
            return 0.0
        start, end = _refine_cycle(recipe, step)
        warm = min(1.0, (step - start + 1) / max(recipe.refine_warmup, 1))
        cool = min(1.0, max(end - step, 0) / max(recipe.refine_cooldown, 1))
        return recipe.refine_lr * warm * cool
    if step < recipe.warmup:
        return recipe.lr * (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(recipe.lr_decay_steps - recipe.warmup, 1)
    cosine = recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))
    return cosine * min(1.0, max(recipe.base_steps - step, 0) / max(recipe.cooldown, 1))


def refine_cycles(recipe: Recipe) -> list[tuple[int, int]]:
    """(first step, end step) of each refine cycle after the base run; empty when there is none."""
    if recipe.base_steps >= recipe.steps:
        return []
    ends = [e for e in recipe.refine_ends if recipe.base_steps < e < recipe.steps]
    return list(pairwise((recipe.base_steps, *ends, recipe.steps)))


def _refine_cycle(recipe: Recipe, step: int) -> tuple[int, int]:
    """(first step, end step) of the refine cycle that ``step`` belongs to."""
    cycles = refine_cycles(recipe)
    return next((c for c in cycles if step < c[1]), cycles[-1])


def _recipe_json(recipe: Recipe) -> dict:
    return json.loads(json.dumps(asdict(recipe)))


def recipe_from_json(data: dict) -> Recipe:
    """The ``Recipe`` stored in a ``trainer_state.json`` (lists back to tuples)."""
    def tup(d: dict) -> dict:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}

    return Recipe(**{**tup(data), "stages": tuple(Stage(**tup(st)) for st in data["stages"])})


def load_recipe(path: str | Path) -> Recipe:
    """The shipped ``Recipe`` with the fields of a JSON file over it: a larger model or batch for a GPU,
    say ``{"num_layers": 8, "batch_tokens": 32768}``. ``stages``, when given, replaces all stages. A
    ``trainer_state.json`` gives the recipe stored in it, to resume a run trained under its own recipe.
    Raises ``ValueError`` saying what is wrong (unreadable JSON, an unknown field, a bad value)."""
    try:
        overrides = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"recipe file {path}: {err}; write a JSON object of Recipe fields "
                         f"(cachecraft train-tiny --print-recipe prints them all)") from err
    if not isinstance(overrides, dict):
        raise ValueError(f"recipe file {path}: expected a JSON object of Recipe fields, got {type(overrides).__name__}")
    if isinstance(overrides.get("recipe"), dict) and "step" in overrides:  # a trainer_state.json
        overrides = overrides["recipe"]
    known = set(_recipe_json(Recipe()))
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"recipe file {path}: unknown field(s) {unknown}; known: {sorted(known)}")
    try:
        recipe = recipe_from_json({**_recipe_json(Recipe()), **overrides})
    except TypeError as err:
        raise ValueError(f"recipe file {path}: a stage is malformed ({err}); each stage needs "
                         f"until, tasks and lengths") from err
    ends = [s.until for s in recipe.stages]
    if ends != sorted(ends) or ends[-1] < recipe.steps:
        raise ValueError(f"recipe file {path}: stage ends must not decrease and the last must reach steps "
                         f"({recipe.steps}); to stretch the shipped stages to another length, use --steps instead")
    uneven = [st.until for st in recipe.stages if st.weights is not None and len(st.weights) != len(st.tasks)]
    if uneven:
        raise ValueError(f"recipe file {path}: the stage(s) ending at {uneven} need one weight per task")
    unknown_tasks = sorted({t for st in recipe.stages for t in st.tasks} - set(TASKS))
    if unknown_tasks:
        raise ValueError(f"recipe file {path}: unknown task(s) {unknown_tasks}; RULER's tasks are {list(TASKS)}")
    return recipe


def extends(new: Recipe, old: Recipe, done: int) -> bool:
    """True when ``new`` trains the first ``done`` steps exactly as ``old`` did: same model, data and
    learning rate for each of them. Such a recipe (a cycle appended, a later stage changed) may resume."""
    def model_part(r: Recipe) -> Recipe:
        return replace(r, steps=0, stages=(), refine_ends=())

    def data(r: Recipe, step: int) -> Stage:  # what a step draws from (a stage's end is not part of it)
        return replace(_stage(r, step), until=0)

    return (model_part(new) == model_part(old) and new.steps >= done
            and all(_lr(new, s) == _lr(old, s) and data(new, s) == data(old, s) for s in range(done)))


def _resumable(recipe: Recipe, state: dict) -> bool:
    """``recipe`` may continue the run in ``state`` (a recipe from another version of this code is not)."""
    try:
        stored = recipe_from_json(state["recipe"])
    except (TypeError, KeyError):  # fields this version does not know, or a damaged state file
        return False
    return extends(recipe, stored, state["step"])


def train(out_dir: str | Path, recipe: Recipe | None = None, tokenizer_dir: str | Path | None = None,
          resume: bool = True, save_every: int = 100, threads: int | None = None,
          max_minutes: float | None = None, device: str | None = None, workers: int | None = None) -> Path:
    """Train (or resume) the embedded model into ``out_dir``; returns the folder.

    Weights and ``trainer_state.json`` are written every ``save_every`` steps; the optimizer
    state goes to ``out_dir/.optim.pt`` (ignored by git). ``max_minutes`` stops cleanly at a checkpoint.
    ``device`` defaults to CUDA when present (then bf16 autocast; weights stay float32). ``workers``
    processes build batches ahead (default: none on a CPU, whose cores the model needs; up to 8 beside
    a GPU); the batches, and so the model, do not depend on it.
    """
    from transformers import AutoTokenizer, LlamaForCausalLM

    from .tokenizer import train_tokenizer

    recipe = recipe or Recipe()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU; install a "
                         f"CUDA build of torch into .venv (see README) or train on --device cpu")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if threads:
        torch.set_num_threads(threads)
    if workers is None:
        workers = min(8, (os.cpu_count() or 2) - 1) if device.startswith("cuda") else 0
    state_path, optim_path, log_path = out / "trainer_state.json", out / ".optim.pt", out / "train_log.csv"

    if resume and state_path.exists():
        state = json.loads(state_path.read_text())
        if not _resumable(recipe, state):
            raise ValueError(f"{state_path} was written by another recipe, which trained its {state['step']} steps "
                             f"differently; pass resume=False (or --fresh) to start over, use the recipe stored "
                             f"there (--recipe {state_path}), or change only what comes after step {state['step']}")
        tokenizer = AutoTokenizer.from_pretrained(out)
        model = LlamaForCausalLM.from_pretrained(out, attn_implementation="sdpa", dtype=torch.float32)
        step, elapsed = state["step"], state["elapsed_s"]
    else:
        tokenizer = (AutoTokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir
                     else train_tokenizer(out, vocab_size=recipe.vocab_size, seed=recipe.seed))
        model = build_model(recipe, tokenizer)
        weights_mb = 4 * sum(p.numel() for p in model.parameters()) / 1e6
        if weights_mb > SHIPPED_BUDGET_MB:
            warnings.warn(f"this recipe's weights take {weights_mb:.1f} MB in float32, over the {SHIPPED_BUDGET_MB:g} MB "
                          f"budget for a model shipped in data/models/; it trains, but cannot replace the shipped one",
                          stacklevel=2)
        step, elapsed = 0, 0.0
        log_path.unlink(missing_ok=True)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.05)
    if resume and optim_path.exists() and step > 0:
        optimizer.load_state_dict(torch.load(optim_path, weights_only=True, map_location=device))

    on_gpu = device.startswith("cuda")
    batches = step_batches(tokenizer, recipe, step, workers, pin_memory=on_gpu)
    model.train()
    started = time.time()
    new_log = not log_path.exists()
    with open(log_path, "a", newline="") as log_file, tqdm(total=recipe.steps, initial=step, desc="train-tiny") as bar:
        writer = csv.writer(log_file)
        if new_log:
            writer.writerow(["step", "loss", "answer_acc", "length", "lr", "elapsed_s"])
        for cpu_batch in batches:
            batch = {k: v.to(device, non_blocking=on_gpu) for k, v in cpu_batch.items()}
            for group in optimizer.param_groups:
                group["lr"] = _lr(recipe, step)
            loss, acc = train_step(model, optimizer, batch)
            step += 1
            now = elapsed + time.time() - started
            writer.writerow([step, f"{loss.item():.4f}", f"{acc:.3f}", batch['input_ids'].shape[1], f"{_lr(recipe, step):.2e}",
                             f"{now:.0f}"])
            bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{acc:.2f}", L=batch['input_ids'].shape[1])
            bar.update(1)
            out_of_time = max_minutes is not None and (time.time() - started) > 60 * max_minutes
            if step % save_every == 0 or step == recipe.steps or out_of_time:
                log_file.flush()
                _checkpoint(model, tokenizer, optimizer, out, recipe, step, now)
            if out_of_time:
                break
    return out


def _device_name(model) -> str:
    """``cpu``, or ``cuda (<GPU name>)``: what the model card says the model was trained on."""
    device = next(model.parameters()).device
    return f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else device.type


def _checkpoint(model, tokenizer, optimizer, out: Path, recipe: Recipe, step: int, elapsed: float) -> None:
    """Weights (safetensors) and tokenizer in ``out``, optimizer beside them, state last (atomic rename)."""
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    atomic_write(out / ".optim.pt", lambda tmp: torch.save(optimizer.state_dict(), tmp))
    n_params = sum(p.numel() for p in model.parameters())
    state = {"step": step, "elapsed_s": round(elapsed), "parameters": n_params, "recipe": _recipe_json(recipe),
             "torch": torch.__version__, "threads": torch.get_num_threads(), "device": _device_name(model)}
    atomic_write_text(out / "trainer_state.json", json.dumps(state, indent=2))
