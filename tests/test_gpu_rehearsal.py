"""The paper profile's rehearsal (scripts/rehearse_paper.py) on a CPU at a down-scaled shape, the record it writes
and ``cachecraft grid --estimate`` reading it: measured where a GPU run recorded the paper's shapes, the roofline
estimate (labelled) otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cachecraft_lib.grid import measured
from cachecraft_lib.models.shapes import LLAMA_31_8B, PAPER_SHAPES, QWEN3_8B, random_model, scaled
from cachecraft_lib.profiles import PAPER_MODELS

REPO = Path(__file__).resolve().parents[1]


def test_the_shapes_are_the_paper_models_and_scale_down_keeping_their_proportions():
    from cachecraft_lib.paper.latency import LLAMA_31_8B as latency_llama

    assert set(PAPER_SHAPES) == set(PAPER_MODELS) and LLAMA_31_8B == latency_llama
    assert (QWEN3_8B["num_hidden_layers"], QWEN3_8B["vocab_size"]) == (36, 151936)
    assert scaled(LLAMA_31_8B, 1) == LLAMA_31_8B
    small = scaled(QWEN3_8B, 0.02)
    assert small["num_hidden_layers"] == 2 and small["vocab_size"] == QWEN3_8B["vocab_size"]
    assert small["num_attention_heads"] // small["num_key_value_heads"] == 4  # the 8B's GQA groups
    assert small["hidden_size"] == small["num_attention_heads"] * small["head_dim"] < 4096
    with pytest.raises(ValueError, match="shape scale"):
        scaled(QWEN3_8B, 0)


def test_a_random_qwen3_shaped_model_builds_offline_and_decodes_without_eos():
    model = random_model("Qwen/Qwen3-8B", 0.02, "cpu", torch.float32)
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.config._attn_implementation == "sdpa"
    assert model.generation_config.eos_token_id is None  # every row decodes its whole budget
    with pytest.raises(ValueError, match="no shape"):
        random_model("gpt2", 0.02, "cpu")


def _record(device="cuda:0", scale=1.0) -> dict:
    group = {"model": "Qwen/Qwen3-8B", "length": 8192, "cells": 31, "samples": 13, "seconds": 65.0,
             "s_per_sample": 5.0, "s_per_cell": 0.1613}
    return {"measured_on": "2027-01-01", "device": device, "device_name": "NVIDIA H200", "shape_scale": scale,
            "groups": [group]}


def test_measured_hours_come_from_seconds_per_sample_and_say_where_they_were_measured(tmp_path):
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(_record()))
    data = measured.load_measured(path)
    assert measured.paper_scale(data)
    assert measured.gpu_hours(data)[0]["gpu_hours"] == round(5.0 * 6500 / 3600, 1)
    text = measured.describe(data, gpus=4)
    assert "measured on 2027-01-01, NVIDIA H200" in text and "code-path check" not in text
    assert not measured.paper_scale(_record("cpu", 0.02)) and not measured.paper_scale(_record(scale=0.5))
    assert "code-path check" in measured.describe(_record("cpu", 0.02))
    assert measured.load_measured(tmp_path / "none.json") is None


def test_a_malformed_record_is_refused_without_echoing_it(tmp_path):
    path = tmp_path / "cost.json"
    for bad in ("not json <script>", json.dumps({"groups": [{"model": "<script>"}]}), json.dumps([1])):
        path.write_text(bad)
        with pytest.raises(measured.MeasurementError) as err:
            measured.load_measured(path)
        assert "<script>" not in str(err.value) and "rehearsal" in str(err.value)


def _estimate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "grid", "--estimate", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def test_grid_estimate_reads_a_paper_scale_measurement_and_nothing_else(tmp_path):
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(_record()))
    done = _estimate("--measured", str(path), "--gpus", "4")
    assert done.returncode == 0, done.stderr
    assert "measured on 2027-01-01, NVIDIA H200" in done.stdout and "roofline" not in done.stdout
    assert _estimate("--measured", str(tmp_path / "missing.json")).returncode == 2


@pytest.mark.slow
def test_the_rehearsal_runs_the_paper_grid_and_latency_at_a_cpu_scale_and_the_estimate_labels_it(tmp_path):
    """One model, one task, 31 cells: the code path of a GPU rehearsal; its record never passes for the cost."""
    out = tmp_path / "cost.json"
    done = subprocess.run([sys.executable, "scripts/rehearse_paper.py", "--device", "cpu", "--shape-scale", "0.02",
                           "--lengths", "1024", "--tasks", "niah_single_1", "--max-new-tokens", "3",
                           "--latency-repeats", "2", "--models", "Qwen/Qwen3-8B", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = measured.load_measured(out)
    (group,) = data["groups"]
    assert (group["model"], group["length"], group["cells"], group["samples"]) == ("Qwen/Qwen3-8B", 1024, 31, 1)
    assert not group["failed"] and len(group["cell_seconds_per_sample"]) == 31
    assert group["s_per_sample"] > 0 and group["s_per_cell"] == pytest.approx(group["s_per_sample"] / 31, rel=0.01)
    assert {r["method"] for r in data["latency"]} == {"no_press", "snapkv", "chunkkv", "frc"}
    assert data["shape_scale"] == 0.02 and not measured.paper_scale(data)
    estimate = _estimate("--measured", str(out))
    assert estimate.returncode == 0 and "code-path check" in estimate.stdout and "roofline" in estimate.stdout
