"""The scorer against hand-computed values, and the loader's cache and fallback behaviour."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from cachecraft_lib import ruler
from cachecraft_lib.ruler import clean_prediction, score, string_match_all, string_match_part
from cachecraft_lib.ruler import dataset as ruler_dataset


def test_string_match_all_hand_computed():
    preds = ["The numbers are 1234567 and 7654321.", "only 1111111", "nothing"]
    refs = [["1234567", "7654321"], ["1111111", "2222222"], ["3333333"]]
    # (2/2 + 1/2 + 0/1) / 3 * 100 = 50.0
    assert string_match_all(preds, refs) == 50.0
    assert string_match_all(["a b"], [["A", "B", "c"]]) == 66.67  # case-insensitive, rounded to 2 dp


def test_string_match_part_hand_computed():
    preds = ["Paris, France", "in london", "Berlin"]
    refs = [["paris", "lyon"], ["Rome", "London"], ["Madrid"]]
    assert string_match_part(preds, refs) == 66.67


def test_clean_prediction_deletes_control_characters():
    assert clean_prediction("  12\n34\t56\x0078  ") == "12345678"
    # KVPress deletes newlines (RULER would turn them into spaces), so a split number still matches
    assert string_match_all([clean_prediction("123\n4567")], [["1234567"]]) == 100.0


def test_score_per_task_and_aggregate():
    df = pd.DataFrame({
        "task": ["niah_single_1", "niah_single_1", "qa_1", "qa_1"],
        "answer": [["1234567"], ["7654321"], ["Paris", "paris city"], ["Rome"]],
        "predicted_answer": ["1234567.", "no", "PARIS", "milan"],
    })
    scores = score(df)
    assert scores == {"niah_single_1": 50.0, "qa_1": 50.0, "aggregate": 50.0}
    df.loc[3, "predicted_answer"] = "rome"
    assert score(df)["aggregate"] == 75.0


def test_score_reads_kvpress_csv_answers(tmp_path):
    path = tmp_path / "predictions.csv"
    pd.DataFrame({"task": ["vt"], "answer": [["AAAAA", "BBBBB"]], "predicted_answer": ["AAAAA"]}).to_csv(path)
    assert score(pd.read_csv(path)) == {"vt": 50.0, "aggregate": 50.0}


def test_score_rejects_missing_columns():
    with pytest.raises(ValueError, match="missing columns"):
        score(pd.DataFrame({"task": ["vt"], "answer": [["A"]]}))


def test_offline_cache_reuse_and_rebuild(tmp_path, tokenizer, caplog):
    kwargs = dict(samples_per_task=1, tasks=["niah_single_1", "cwe"], cache_dir=tmp_path)
    first = ruler.load_offline(1024, tokenizer, **kwargs)
    files = sorted(tmp_path.iterdir())
    assert [f.suffix for f in files] == [".json", ".parquet"]
    manifest = json.loads(files[0].read_text())
    assert manifest["length"] == 1024 and manifest["generator_version"] == ruler.GENERATOR_VERSION
    assert manifest["tokenizer_fingerprint"] and manifest["samples_per_task"] == 1

    again = ruler.load_offline(1024, tokenizer, **kwargs)
    assert again.equals(first)

    files[1].write_bytes(b"not a parquet file")  # corrupt the data
    with caplog.at_level(logging.WARNING):
        rebuilt = ruler.load_offline(1024, tokenizer, **kwargs)
    assert "rebuilding" in caplog.text
    assert rebuilt.equals(first)

    meta = json.loads(files[0].read_text())
    meta["seed"] = 7  # a manifest that does not match the request
    files[0].write_text(json.dumps(meta))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ruler.load_offline(1024, tokenizer, **kwargs)
    assert "rebuilding" in caplog.text


def test_auto_falls_back_to_offline_with_one_log_line(tmp_path, tokenizer, monkeypatch, caplog):
    def unreachable(length):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(ruler_dataset, "load_hf", unreachable)
    monkeypatch.setattr(ruler_dataset, "hub_reachable", lambda timeout=3.0: True)  # reachable, then fails
    with caplog.at_level(logging.WARNING):
        df = ruler.load(1024, tokenizer, source="auto", samples_per_task=1, tasks=["vt"], cache_dir=tmp_path)
    assert df.attrs["source"] == "offline"
    assert sum("offline generator" in r.message for r in caplog.records) == 1
    with pytest.raises(RuntimeError, match="source='offline'"):
        ruler.load(1024, tokenizer, source="hf")
    monkeypatch.setattr(ruler_dataset, "hub_reachable", lambda timeout=3.0: False)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert ruler.load(1024, tokenizer, source="auto", samples_per_task=1, tasks=["vt"],
                          cache_dir=tmp_path).attrs["source"] == "offline"
    assert len(caplog.records) == 1 and "unreachable" in caplog.records[0].message


def test_hf_source_is_used_as_is_when_reachable(monkeypatch, tokenizer):
    fake = pd.DataFrame({"context": ["c"] * 3, "question": ["q"] * 3, "answer_prefix": ["a"] * 3,
                         "answer": [["x"]] * 3, "task": ["vt", "vt", "cwe"], "max_new_tokens": [30, 30, 120]})
    monkeypatch.setattr(ruler_dataset, "load_hf", lambda length: fake)
    monkeypatch.setattr(ruler_dataset, "hub_reachable", lambda timeout=3.0: True)
    df = ruler.load(4096, tokenizer, source="auto", samples_per_task=1)
    assert df.attrs["source"] == "hf" and list(df.task) == ["vt", "cwe"]
