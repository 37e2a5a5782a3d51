"""Answering with a press: KVPress's pipeline, plus a variant that feeds the question token by token.

KVPress's stock ``KVPressTextGenerationPipeline`` feeds the whole question in one forward pass. On
CPU with sdpa that breaks two families of presses:
head-wise masking presses (AdaKV, ExpectedAttention in the registry) cannot find fake keys for many
question tokens at once on a small model, and layer-varying presses (PyramidKV) need a mask that
transformers cannot build for caches of different lengths. Feeding the question one token at a
time fixes both (one query builds no mask; each fake-key search sees one query per head), and gives
the same answers as the stock pipeline wherever both work (a test checks it).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpress import KVPressTextGenerationPipeline

from ..methods.registry import REGISTRY, make_press


class TokenwiseQuestionPipeline(KVPressTextGenerationPipeline):
    """KVPress's pipeline with the question prefilled one token at a time (greedy decoding unchanged)."""

    def generate_answer(self, question_ids: torch.Tensor, cache: Any, context_length: int,
                        max_new_tokens: int) -> str:
        device = self.model.device
        question_ids = question_ids.to(device)
        outputs = None
        for i in range(question_ids.shape[1]):
            outputs = self.model(input_ids=question_ids[:, i : i + 1], past_key_values=cache,
                                 position_ids=torch.tensor([[context_length + i]], device=device), logits_to_keep=1)
        position = context_length + question_ids.shape[1]
        generated = [outputs.logits[0, -1].argmax()]
        stop = self.model.generation_config.eos_token_id
        stop = stop if isinstance(stop, list) else [stop]
        for i in range(max_new_tokens - 1):
            outputs = self.model(input_ids=generated[-1].view(1, 1), past_key_values=cache,
                                 position_ids=torch.tensor([[position + i]], device=device))
            generated.append(outputs.logits[0, -1].argmax())
            if generated[-1].item() in stop:
                break
        return str(self.tokenizer.decode(torch.stack(generated), skip_special_tokens=True))


class NoRepeatPipeline(KVPressTextGenerationPipeline):
    """KVPress's pipeline whose greedy decoding may not start a word with a token that started an earlier
    word of the answer. A diagnostic (``tiny.diagnose``), never a way to score a method."""

    def generate_answer(self, question_ids: torch.Tensor, cache: Any, context_length: int,
                        max_new_tokens: int) -> str:
        device = self.model.device
        positions = torch.arange(context_length, context_length + question_ids.shape[1], device=device)[None]
        logits = self.model(input_ids=question_ids.to(device), past_key_values=cache, position_ids=positions,
                            logits_to_keep=1).logits[0, -1]
        stop = self.model.generation_config.eos_token_id
        stop = set(stop if isinstance(stop, list) else [stop])
        written: list[int] = []
        banned: set[int] = set()
        for i in range(max_new_tokens):
            if banned:
                logits = logits.clone()
                logits[list(banned)] = float("-inf")
            token = int(logits.argmax())
            written.append(token)
            if token in stop:
                break
            piece = self.tokenizer.decode([token])
            if (piece.startswith(" ") or len(written) == 1) and piece.strip()[:1].isalpha():
                banned.add(token)
            logits = self.model(input_ids=torch.tensor([[token]], device=device), past_key_values=cache,
                                position_ids=positions[:, -1:] + 1 + i).logits[0, -1]
        return str(self.tokenizer.decode(written, skip_special_tokens=True))


def tokenwise_question(method: str) -> bool:
    """Whether ``method``'s question is fed token by token: a property of the method, never of the sample.

    Methods whose caches can differ in length between layers or carry head masks (``needs_tokenwise_question``:
    whole-chunk selection's masked spare slots, AdaKV, PyramidKV) are always fed token by token, even on a sample
    that needed no mask, every other method in one forward. In float32 the two feeds give the same answers (tests); in
    bfloat16 they round differently, so a feed chosen sample by sample would mix two rounding paths in one
    method's answers. (The grid's batched engine in float32 feeds every row in one forward: ``grid.runner``.)
    """
    return REGISTRY[method].needs_tokenwise_question


def make_pipeline(model: Any, tokenizer: Any, tokenwise: bool = False) -> KVPressTextGenerationPipeline:
    """KVPress's pipeline (``tokenwise=False``) or the token-by-token question variant."""
    cls = TokenwiseQuestionPipeline if tokenwise else KVPressTextGenerationPipeline
    return cls(model=model, tokenizer=tokenizer, device=model.device)


class Answerer:
    """Answers RULER rows with any registered method, choosing the pipeline each method needs.

    ``query_aware=True`` puts the question inside the compressed context (KVPress's ``--query_aware``):
    ``context += question`` and the question becomes "". Finch always runs query-aware (it must
    find the question after its delimiter), exactly as KVPress's evaluate.py enforces.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self._pipes: dict[bool, KVPressTextGenerationPipeline] = {}
        self._finch_ready = False

    def pipe(self, tokenwise: bool) -> KVPressTextGenerationPipeline:
        if tokenwise not in self._pipes:
            self._pipes[tokenwise] = make_pipeline(self.model, self.tokenizer, tokenwise)
        return self._pipes[tokenwise]

    def answer(self, method: str, ratio: float, context: str, question: str, answer_prefix: str,
               max_new_tokens: int, query_aware: bool = False, press: Any = None) -> str:
        spec = REGISTRY[method]
        press = press if press is not None else make_press(method, ratio)
        if spec.needs_query_aware:
            self._setup_finch(press)
            context, question = context + press.delimiter_token + question, ""
        elif query_aware:
            context, question = context + question, ""
        out = self.pipe(tokenwise_question(method))(context, question=question, answer_prefix=answer_prefix,
                                                       press=press, max_new_tokens=int(max_new_tokens))
        return out["answer"]

    def _setup_finch(self, press: Any) -> None:
        """Finch's delimiter token, added once to the tokenizer and model (KVPress's own method)."""
        token = "<|finch_sep|>"
        if not self._finch_ready:
            press.update_model_and_tokenizer(self.model, self.tokenizer, token)
            self._finch_ready = True
        press.delimiter_token = token
        press.delimiter_token_id = self.tokenizer.convert_tokens_to_ids(token)
