"""The prepared GPU check: the shell script parses and dry-runs on a CPU; its Python steps run on a CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _steps():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPTS / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shell_script_parses_and_dry_runs_every_step_under_a_timeout(tmp_path):
    subprocess.run(["bash", "-n", str(SCRIPTS / "gpu_check.sh")], check=True)
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), str(tmp_path)], env={**os.environ, "DRY_RUN": "1"},
                          capture_output=True, text=True, check=True, cwd=SCRIPTS.parent)
    steps = (tmp_path / "steps.txt").read_text().splitlines()
    assert [s.split()[1] for s in steps] == ["env", "prefill", "fetch_instruct", "instruct", "paper", "search",
                                             "latency", "train_tiny"]
    limits = [int(s.split("timeout ")[1].split("s)")[0]) for s in steps]
    assert all(0 < t <= 150 for t in limits) and "results in" in done.stdout


def test_the_whole_check_stays_within_its_budget(tmp_path):
    """Each step gets min(its timeout, what is left of BUDGET_S); under MIN_STEP_S left, it is skipped."""
    script = tmp_path / "check.sh"
    text = (SCRIPTS / "gpu_check.sh").read_text()
    head = text[:text.index("# 1. CUDA")]  # the budget and step() as they are, with steps of our own
    script.write_text(head + 'step a 5 sleep 1\nstep b 100 sleep 100\nstep c 100 sleep 100\n')
    start = time.monotonic()
    subprocess.run(["bash", str(script), str(tmp_path / "out")], env={**os.environ, "BUDGET_S": "6", "MIN_STEP_S": "2"}, check=True,
                   capture_output=True, cwd=SCRIPTS.parent)
    assert time.monotonic() - start < 10
    steps = (tmp_path / "out" / "steps.txt").read_text().splitlines()
    assert steps[0] == "a rc=0" and steps[1] == "b rc=124" and steps[2].startswith("c skipped")


def test_env_and_prefill_steps_on_cpu(tmp_path):
    steps = _steps()
    assert steps.main(["env", "--out", str(tmp_path), "--device", "cpu"]) == 0
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["torch"] and "matmul_fp32_precision" in env
    assert steps.main(["prefill", "--out", str(tmp_path), "--device", "cpu", "--model", "tiny", "--length", "256"]) == 0
    record = json.loads((tmp_path / "prefill.json").read_text())
    assert record["length"] == 256 and record["captured_gib"] > 0
    lengths = record["cache_lengths"]
    assert set(lengths) == set(steps.PRESSES) and all(len(v) == 4 for v in lengths.values())  # tiny: 4 layers
    for name, per_layer in lengths.items():  # head-wise presses keep the length and mask evicted keys per head
        assert (max(per_layer) == 256) == (name in ("adasnapkv", "expected_attention")), name


@pytest.mark.slow
def test_instruct_step_on_cpu(tmp_path):
    """The instruct step's code path on a CPU with the embedded model (on the GPU it runs SmolLM2 on CUDA)."""
    steps = _steps()
    record = steps.instruct_record(tmp_path, "tiny", "cpu", length=1024, samples=1, max_new=4,
                                   tasks=("niah_single_1", "vt"))
    cells = record["cells"]
    assert set(cells) == {"no_press", *steps.INSTRUCT_METHODS} and record["samples"] == 2
    for name, cell in cells.items():
        assert cell["answers"] == 2 and 0 <= cell["same_answers_bf16_vs_fp32"] <= 2
        assert cell["feed_bfloat16"] == ("tokenwise" if name in ("frc", "chunkkv", "adasnapkv") else "batched")
    feeds = record["feeds_bfloat16"]
    assert all(f["n"] == 2 for f in feeds.values())
    assert feeds["snapkv"]["pipeline_n"] == 2 and not feeds["snapkv"]["pipeline_errors"]  # the stock feed runs
    assert feeds["frc"]["pipeline_n"] == 0  # not asked of KVPress's one-forward feed (uneven caches)


def test_paper_step_skips_without_cached_weights_and_checks_chat_prompts(tmp_path, monkeypatch, tokenizer):
    steps = _steps()
    monkeypatch.setattr(steps, "cached_paper_models", lambda: [])
    assert "skipped" in steps.paper_record(tmp_path, "cpu")
    # Qwen3's template with thinking off (KVPress's default): the suffix carries an empty think block
    monkeypatch.setattr(tokenizer, "chat_template", QWEN3_LIKE)
    chat = steps.chat_check(tokenizer)
    assert chat["think_suffix_empty"] and chat["assistant_header"] and chat["context_last"] and chat["question_first"]


@pytest.mark.slow
def test_paper_step_with_cached_weights_runs_its_cells(tmp_path, monkeypatch):
    """The paper step's path once weights are cached, with the embedded model standing in for the paper's."""
    steps = _steps()
    monkeypatch.setattr(steps, "cached_paper_models", lambda: ["tiny"])
    record = steps.paper_record(tmp_path, "cpu", length=1024, tasks=("niah_single_1", "vt"))
    assert set(record["cells"]) == {"no_press", *steps.PAPER_METHODS}
    assert all(c["seconds_per_sample"] > 0 and c["ruler_source"] in ("hf", "offline") for c in record["cells"].values())
    assert record["cells"]["frc"]["question_feed"] == "tokenwise"  # bf16: the method's feed
    assert record["chat"]["tiny"]["context_last"]  # no chat template: bos + context, as KVPress does


QWEN3_LIKE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and "
              "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")
