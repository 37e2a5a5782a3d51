"""The grid runner: complete result files, recomputable scores, resume mid-batch, corruption, shards."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cachecraft_lib.grid import Cell, CellStore, grid_cells, parse_shard, run_grid, runner, select_shard
from cachecraft_lib.profiles import EMBEDDED_MODEL, get_profile
from cachecraft_lib.ruler import score

SMALL = dict(samples_per_task=2, ruler_source="offline", tasks=("niah_single_1", "vt"), max_new_tokens=6)


def _cells():
    return [Cell(EMBEDDED_MODEL, 1024, "no_press", 0.0, **SMALL), Cell(EMBEDDED_MODEL, 1024, "frc", 0.88, **SMALL),
            Cell(EMBEDDED_MODEL, 1024, "snapkv", 0.5, **SMALL)]


@pytest.mark.slow
def test_grid_writes_complete_recomputable_results(tmp_path):
    summary = run_grid(_cells(), tmp_path, progress=False)
    assert len(summary) == 3 and set(summary.method) == {"no_press", "frc", "snapkv"}
    for cell in _cells():
        folder = tmp_path / cell.key
        result = json.loads((folder / "result.json").read_text())
        assert result["config"] == json.loads(json.dumps(cell.config()))
        assert result["dataset"]["source"] == "offline" and result["dataset"]["rows"] == 4
        assert result["embedded_model"] is True and result["timings"]["total_s"] > 0
        preds = pd.DataFrame(result["predictions"])
        assert len(preds) == 4 and set(preds.task) == {"niah_single_1", "vt"}
        assert score(preds) == result["scores"]  # scores recomputable from stored predictions
        # KVPress's own layout
        kv = pd.read_csv(folder / "predictions.csv")
        assert {"predicted_answer", "compression_ratio", "answer", "task"} <= set(kv.columns) and "context" not in kv
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics == {t: {"string_match": v} for t, v in result["scores"].items() if t != "aggregate"}
        assert "press_init_command" in (folder / "config.yaml").read_text()
        assert not (folder / "partial.jsonl").exists()


@pytest.mark.slow
def test_resume_after_interruption_mid_batch_recomputes_nothing_finished(tmp_path, monkeypatch):
    calls = {"n": 0, "rows": 0}
    real = runner.decode_rows

    def flaky(model, tokenizer, rows, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # killed while decoding the third sample's batch
            raise KeyboardInterrupt
        calls["rows"] += len(rows)
        return real(model, tokenizer, rows, *args, **kwargs)

    monkeypatch.setattr(runner, "decode_rows", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_grid(_cells(), tmp_path, progress=False)
    assert calls["rows"] == 2 * 3  # two samples x three cells were answered and kept in partial files

    calls.update(n=-10**6, rows=0)  # no more interruptions; count the work the resume does
    run_grid(_cells(), tmp_path, progress=False)
    assert calls["rows"] == 3 * 4 - 6  # only the missing answers: the batch in flight and the last sample

    mtimes = {c.key: (tmp_path / c.key / "result.json").stat().st_mtime_ns for c in _cells()}
    calls.update(n=-10**6, rows=0)
    run_grid(_cells(), tmp_path, progress=False)
    assert calls["rows"] == 0  # a finished grid recomputes nothing
    assert mtimes == {c.key: (tmp_path / c.key / "result.json").stat().st_mtime_ns for c in _cells()}


@pytest.mark.slow
def test_corrupt_or_stale_result_is_recomputed(tmp_path, caplog):
    cells = _cells()[:1]
    run_grid(cells, tmp_path, progress=False)
    path = tmp_path / cells[0].key / "result.json"
    good = json.loads(path.read_text())
    store = CellStore(tmp_path)
    path.write_text('{"fingerprint": "x", "predic')  # torn write
    assert store.status(cells[0], good["fingerprint"]) == "corrupt"
    run_grid(cells, tmp_path, progress=False)
    assert "corrupt" in caplog.text and json.loads(path.read_text())["scores"] == good["scores"]
    path.write_text(json.dumps({**good, "fingerprint": "0000"}))  # made by another config/library
    assert store.status(cells[0], good["fingerprint"]) == "stale"
    run_grid(cells, tmp_path, progress=False)
    assert json.loads(path.read_text())["fingerprint"] == good["fingerprint"]


def test_shards_cover_every_cell_exactly_once():
    cells = grid_cells(get_profile("cpu"))
    assert len(cells) == 2 * (1 + 5 * 6)
    for n in (1, 3, 7):
        shards = [select_shard(cells, i, n) for i in range(n)]
        keys = [c.key for shard in shards for c in shard]
        assert sorted(keys) == sorted(c.key for c in cells) and len(set(keys)) == len(keys)
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "a/b", "1"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)


def test_paper_grid_shape():
    cells = grid_cells(get_profile("paper"))
    assert len(cells) == 2 * 2 * (1 + 5 * 6)  # 2 models x 2 lengths x (no_press + 5 ratios x 6 methods)
    assert all(c.samples_per_task is None and c.ruler_source == "hf" for c in cells)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["no_press", "frc", "chunkkv", "adasnapkv", "pyramidkv", "v1_tokenwise"])
def test_shared_prefill_gives_the_pipeline_answers(tiny_model, tiny_rows, method):
    from cachecraft_lib.grid import answer_one
    from cachecraft_lib.models.pipeline import Answerer
    from cachecraft_lib.models.prefill import SharedPrefill

    model, tok = tiny_model
    answerer = Answerer(model, tok)
    cell = Cell(EMBEDDED_MODEL, 1024, method, 0.75)
    for row in tiny_rows.iloc[:2].itertuples():
        ids = answerer.pipe(False).preprocess(row.context, [row.question], row.answer_prefix, max_context_length=10**9)
        shared = SharedPrefill(model, ids["context_ids"])
        a = answer_one(answerer, shared, cell, ids["questions_ids"][0], 8)
        b = answerer.answer(method, 0.75, row.context, row.question, row.answer_prefix, 8)
        assert a == b, (method, row.task)


def test_paper_grid_estimate_grows_with_length_and_splits_over_gpus(ruler_1024, tokenizer):
    from cachecraft_lib.grid.cost import describe, paper_grid_estimate

    table = paper_grid_estimate(ruler_1024, tokenizer)
    assert len(table) == 4 and (table.cells == 31).all()
    for _, group in table.groupby("model"):
        assert group.sort_values("length").gpu_hours.is_monotonic_increasing
    one, four = table.attrs["summary"]["1 GPU(s)"], table.attrs["summary"]["4 GPU(s)"]
    assert one == round(table.gpu_hours.sum(), 1) and abs(four - one / 4) < 0.1
    assert "estimate" in describe(table)
