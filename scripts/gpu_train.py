"""Step ``train`` (d): a short ``train-tiny`` on CUDA with data workers, into a temporary folder (its weights
and optimiser state never go to OUT); the loss must stay finite. The training log is kept for the logs."""

from __future__ import annotations

import csv
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

TOKENIZER = Path(__file__).resolve().parents[1] / "data" / "models" / "tiny-ruler-llama"


def run(work: Path, scale: str) -> dict:
    from cachecraft_lib.tiny.recipe import Recipe
    from cachecraft_lib.tiny.train import train

    gpu = scale == "gpu"
    recipe = Recipe().scaled(30) if gpu else Recipe(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                                                     intermediate_size=64, batch_tokens=512).scaled(4)
    with tempfile.TemporaryDirectory(prefix="gpu_check_train_") as tmp:
        start = time.time()
        train(tmp, recipe, tokenizer_dir=TOKENIZER, resume=False, save_every=15 if gpu else 2,
              device="cuda" if gpu else "cpu", workers=4 if gpu else 1, threads=None if gpu else 1)
        seconds = time.time() - start
        state = json.loads((Path(tmp) / "trainer_state.json").read_text())
        shutil.copyfile(Path(tmp) / "train_log.csv", work / "train_log.csv")
    with open(work / "train_log.csv") as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    finite = all(math.isfinite(x) for x in losses)
    record = {"steps": state["step"], "device": state["device"], "seconds_train": round(seconds, 1),
              "steps_per_s": round(state["step"] / seconds, 2), "first_loss": losses[0], "last_loss": losses[-1],
              "parameters": state["parameters"]}
    if not finite or state["step"] != recipe.steps:
        record["verdict"] = f"fail: {state['step']} of {recipe.steps} steps, losses finite: {finite}"
    else:
        record["verdict"] = "pass" if gpu else "cpu scale (no CUDA): a few CPU steps of a small recipe"
    record["headline"] = (f"{state['step']} steps on {state['device']} in {seconds:.0f}s, loss {losses[0]:.3f} -> "
                          f"{losses[-1]:.3f}")
    return record
