"""The training loop of the embedded model: build, step, checkpoint and resume (``cachecraft train-tiny``)."""

from __future__ import annotations

import csv
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..util.atomic import atomic_write, atomic_write_text
from ..util.progress import tqdm
from .batches import step_batches
from .losses import weighted_loss
from .recipe import SHIPPED_BUDGET_MB, Recipe, lr_at, recipe_json, resumable


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
        if not resumable(recipe, state):
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
    on_gpu = device.startswith("cuda")
    batches = start_batches(tokenizer, recipe, step, workers, on_gpu)  # before the model touches CUDA
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.05)
    if resume and optim_path.exists() and step > 0:
        optimizer.load_state_dict(torch.load(optim_path, weights_only=True, map_location=device))

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
                group["lr"] = lr_at(recipe, step)
            loss, acc = train_step(model, optimizer, batch)
            step += 1
            now = elapsed + time.time() - started
            writer.writerow([step, f"{loss.item():.4f}", f"{acc:.3f}", batch['input_ids'].shape[1], f"{lr_at(recipe, step):.2e}",
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


def start_batches(tokenizer: Any, recipe: Recipe, step: int, workers: int, pin_memory: bool) -> Iterator[dict]:
    """The batch iterator, its worker processes started now: they are forked, and a process forked after CUDA
    is initialised inherits a CUDA state it cannot use, so ``train`` starts them before the model moves to the
    GPU. If CUDA is already initialised here (a caller used it), the batches are built in this process."""
    if workers > 0 and torch.cuda.is_initialized():
        warnings.warn("CUDA is already initialised in this process, so no data workers are forked (a forked "
                      "worker cannot use CUDA); batches are built here. Call train() from a fresh process "
                      "(cachecraft train-tiny) for workers.", stacklevel=3)
        workers = 0
    return iter(step_batches(tokenizer, recipe, step, workers, pin_memory=pin_memory))


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
    state = {"step": step, "elapsed_s": round(elapsed), "parameters": n_params, "recipe": recipe_json(recipe),
             "torch": torch.__version__, "threads": torch.get_num_threads(), "device": _device_name(model)}
    atomic_write_text(out / "trainer_state.json", json.dumps(state, indent=2))
