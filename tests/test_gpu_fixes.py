"""What a GPU run needs that a CPU run never shows, checked on a CPU: synchronised timers, FRC's density in
full float32 precision, data workers started before CUDA, the search's dtype and its workers' peak memory."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from cachecraft_lib.methods import frc
from cachecraft_lib.util import timers


@pytest.fixture()
def synchronize_calls(monkeypatch):
    """torch.cuda.synchronize replaced by a recorder (there is no GPU here to wait for)."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    return calls


def test_clock_waits_for_a_cuda_device_and_not_for_a_cpu(synchronize_calls):
    timers.clock("cpu")
    timers.clock(torch.device("cpu"))
    assert synchronize_calls == []
    timers.clock(torch.device("cuda", 0))
    timers.clock("cuda")
    assert [torch.device(d).type for d in synchronize_calls] == ["cuda", "cuda"]


def test_shared_prefill_reads_a_synchronised_clock_around_its_forward(monkeypatch, tiny_model):
    from cachecraft_lib.models import prefill

    model, _ = tiny_model
    readings = []
    monkeypatch.setattr(prefill, "clock", lambda device: readings.append(device) or float(len(readings)))
    shared = prefill.SharedPrefill(model, torch.randint(10, 100, (1, 32)))
    assert readings == [model.device, model.device] and shared.seconds == 1.0


def test_grid_rows_and_serial_cells_are_timed_with_the_synchronised_clock(monkeypatch, tmp_path):
    from cachecraft_lib.grid import Cell, run_grid, runner

    devices = []
    real = runner.clock
    monkeypatch.setattr(runner, "clock", lambda device: devices.append(torch.device(device)) or real(device))
    kw = dict(samples_per_task=1, ruler_source="offline", tasks=("niah_single_1",), max_new_tokens=2)
    cells = [Cell("tiny", 512, "no_press", 0.0, **kw), Cell("tiny", 512, "snapkv", 0.5, **kw)]
    run_grid(cells, tmp_path / "batched", progress=False, device="cpu")
    assert len(devices) == 2 * 2 + 2  # each row's compression (2 readings) and the batched decode (2)
    devices.clear()
    run_grid(cells, tmp_path / "serial", progress=False, device="cpu", decode="serial")
    assert len(devices) == 2 * 2 and {d.type for d in devices} == {"cpu"}


def test_density_convolution_runs_with_tf32_off_on_cuda_and_restores_the_setting():
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    with frc.exact_fp32(torch.device("cuda")):
        assert conv.fp32_precision == "ieee"
    assert conv.fp32_precision == before
    with frc.exact_fp32(torch.device("cpu")):  # a CPU has no TF32: nothing is touched
        assert conv.fp32_precision == before
    with pytest.raises(RuntimeError), frc.exact_fp32(torch.device("cuda")):
        raise RuntimeError("restored even when the block raises")
    assert conv.fp32_precision == before


def test_density_uses_the_exact_precision_block_for_its_device(monkeypatch):
    seen = []
    real = frc.exact_fp32
    monkeypatch.setattr(frc, "exact_fp32", lambda device: seen.append(torch.device(device)) or real(device))
    abar = torch.rand(100, dtype=torch.float32)
    out = frc.density(abar, 5)
    expected = torch.stack([torch.nn.functional.pad(abar, (2, 2))[i:i + 5].sum() / 5 for i in range(100)])
    assert seen == [torch.device("cpu")] and torch.allclose(out, expected, atol=1e-7)


def test_train_starts_its_data_workers_before_the_model_moves_to_the_device(monkeypatch, tmp_path):
    from cachecraft_lib.tiny import train as train_mod
    from cachecraft_lib.tiny.recipe import Recipe

    events = []
    real_start, real_to = train_mod.start_batches, torch.nn.Module.to
    monkeypatch.setattr(train_mod, "start_batches", lambda *a: events.append("workers") or real_start(*a))
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: events.append("to") or real_to(self, *a, **k))
    recipe = Recipe(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                    batch_tokens=512).scaled(1)
    train_mod.train(tmp_path, recipe, tokenizer_dir="tests/assets/tokenizer", save_every=1, threads=1, workers=0)
    assert events.index("workers") < events.index("to")


def test_no_worker_is_forked_once_cuda_is_initialised(monkeypatch, tokenizer):
    from cachecraft_lib.tiny import train as train_mod
    from cachecraft_lib.tiny.recipe import Recipe

    asked = []
    monkeypatch.setattr(train_mod, "step_batches", lambda tok, rec, step, workers, pin_memory: asked.append(workers)
                        or iter(()))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.warns(UserWarning, match="no data workers are forked"):
        train_mod.start_batches(tokenizer, Recipe(), 0, 4, False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_mod.start_batches(tokenizer, Recipe(), 0, 4, False)
    assert asked == [0, 4]


def test_search_settings_carry_the_profiles_dtype(monkeypatch, tmp_path):
    from cachecraft_lib.profiles import get_profile
    from cachecraft_lib.search import cascade
    from cachecraft_lib.search.evolve import settings_for

    assert settings_for(get_profile("paper"), "v5").dtype == "bfloat16"
    settings = settings_for(get_profile("smoke", device="cuda", dtype="float32"), "v5")
    assert settings.dtype == "float32"  # not "auto", which is bfloat16 on CUDA
    settings.save(tmp_path / "c.json")
    assert cascade.SearchSettings.from_file(tmp_path / "c.json").dtype == "float32"
    asked = {}

    def fake_load(name, device=None, dtype="auto"):
        asked.update(device=device, dtype=dtype)
        raise RuntimeError("stop here")

    monkeypatch.setattr(cascade, "load_model", fake_load)
    with pytest.raises(RuntimeError, match="stop here"):
        cascade.CascadeEvaluator(settings)
    assert asked == {"device": "cuda", "dtype": "float32"}


def test_memory_readings_are_taken_per_process_and_the_last_one_kept(tmp_path):
    from cachecraft_lib.search import memory

    memory.append_reading(tmp_path)
    memory.append_reading(tmp_path)
    lines = (tmp_path / memory.MEMORY_FILE).read_text().splitlines()
    assert len(lines) == 2
    (entry,) = memory.peaks(tmp_path)
    assert entry == json.loads(lines[-1]) and entry["rss_peak_mib"] > 10 and entry["worker"] is False
    assert entry["cuda_peak_gib"] is None  # CUDA never used in this process
