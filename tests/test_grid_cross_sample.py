"""The grid's cross-sample decode (``grid.batches``): the rows of several samples decoded together give every
cell the answers it gets sample by sample, and the batch is sized by free memory on CUDA, not a fixed fraction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cachecraft_lib.grid import Cell, run_grid
from cachecraft_lib.grid import decode as engine
from cachecraft_lib.grid.batches import MAX_SAMPLES, DecodePlan, Waiting, decode_plan
from cachecraft_lib.grid.decode import RESERVE_BYTES, CacheRow, default_batch_size, row_bytes
from cachecraft_lib.profiles import EMBEDDED_MODEL

TASKS = ("niah_single_1", "niah_multikey_2", "vt", "qa_1")
GiB = 1 << 30


def _answers(out: Path, cells: list[Cell]) -> dict[tuple[str, int], str]:
    answers = {}
    for cell in cells:
        result = json.loads((out / cell.key / "result.json").read_text())
        answers.update({(cell.key, p["index"]): p["predicted_answer"] for p in result["predictions"]})
    return answers


@pytest.mark.slow
def test_rows_of_every_sample_decoded_together_give_the_per_sample_answers(tmp_path, monkeypatch):
    """4 samples x 5 cells (a head-wise press, Finch's own prefill, caches of several widths): one decode of all
    20 rows against one decode per sample; answers identical in float32."""
    common = dict(samples_per_task=1, ruler_source="offline", max_new_tokens=6, tasks=TASKS)
    cells = [Cell(EMBEDDED_MODEL, 1024, m, r, **common) for m, r in (
        ("no_press", 0.0), ("frc", 0.88), ("snapkv", 0.5), ("adasnapkv", 0.5), ("finch", 0.88))]
    decoded = []
    real = engine.decode_by_width

    def spy(model, tokenizer, rows, batch_size=None):
        decoded.append(len(rows))
        return real(model, tokenizer, rows, batch_size)

    run_grid(cells, tmp_path / "one", progress=False, device="cpu", dtype="float32", samples_per_decode=1)
    monkeypatch.setattr("cachecraft_lib.grid.runner.decode_by_width", spy)
    run_grid(cells, tmp_path / "all", progress=False, device="cpu", dtype="float32", samples_per_decode=4)
    assert decoded == [4 * len(cells)]  # every sample's rows in one decode
    one, together = _answers(tmp_path / "one", cells), _answers(tmp_path / "all", cells)
    assert len(one) == 4 * len(cells) and len({a for a in one.values()}) > 1
    assert {k for k in one if one[k] != together[k]} == set()


def _row(layers: int, width: int, kv_heads: int = 8, dim: int = 128, dtype=torch.bfloat16) -> CacheRow:
    keys = [torch.zeros(1, kv_heads, width, dim, dtype=dtype, device="meta") for _ in range(layers)]
    return CacheRow(keys, keys, [None] * layers, torch.zeros(1, 30, dtype=torch.long), width, 20)


def test_a_cuda_batch_is_what_the_free_memory_holds_less_a_reserve(monkeypatch):
    rows = [_row(32, 8192), _row(32, 1024)]
    per_row = row_bytes(rows)
    assert per_row == int(1.25 * 2 * 32 * 8 * (8192 + 30 + 20) * 128 * 2)  # padded to the widest, bf16
    for free in (20 * GiB, 130 * GiB):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, f=free: (f, 141 * GiB))
        assert default_batch_size(rows * 100, torch.device("cuda")) == (free - RESERVE_BYTES) // per_row
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (RESERVE_BYTES // 2, 141 * GiB))
    assert default_batch_size(rows, torch.device("cuda")) == 1  # never none
    assert default_batch_size(rows * 3, torch.device("cpu")) == 6  # on a CPU every row


def test_samples_wait_for_one_decode_until_the_plan_is_full(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (41 * GiB, 141 * GiB))
    plan = decode_plan(torch.device("cuda"))
    assert plan == DecodePlan(MAX_SAMPLES, 20 * GiB)  # half of what is free after the reserve
    waiting = Waiting()
    small = _row(2, 16, dtype=torch.float32)
    for sample in range(3):
        for _ in range(2):
            waiting.add("job", sample, small, 0.1)
    assert waiting.samples == 3 and waiting.nbytes == 6 * small.nbytes()
    assert DecodePlan(3).full(waiting) and not DecodePlan(4).full(waiting)
    assert DecodePlan(100, max_bytes=6 * small.nbytes()).full(waiting)
    assert decode_plan(torch.device("cpu"), samples=5) == DecodePlan(5)
    with pytest.raises(ValueError, match="samples_per_decode"):
        decode_plan(torch.device("cpu"), samples=0)
    waiting.clear()
    assert waiting.samples == 0 and waiting.nbytes == 0 and not DecodePlan(1).full(waiting)
