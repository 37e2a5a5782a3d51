"""Two checkouts in different folders write byte-identical tables from the same per-sample scores.

The grid's result files name the model by the folder it was loaded from; a clone elsewhere writes another path.
The bootstrap keys its random stream on the model's name (``intervals.stable_key``), so nothing changes.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd

from cachecraft_lib.grid.samples import load_samples
from cachecraft_lib.paper import analysis, claims
from cachecraft_lib.paper.precision import precision_table
from cachecraft_lib.report import figures as report
from cachecraft_lib.ruler import score

TASKS = ("niah_single_1", "vt", "qa_1")
CELLS = [("no_press", 0.0), ("frc", 0.8), ("snapkv", 0.8), ("chunkkv", 0.8), ("frc", 0.88), ("snapkv", 0.88),
         ("chunkkv", 0.88)]


def write_grid(root, model: str, n: int = 6) -> None:
    """Result files as the grid writes them, with predictions that hit or miss the references at random."""
    rng = np.random.default_rng(0)
    for method, ratio in CELLS:
        preds = [{"index": i, "task": t, "answer": [f"v{i}"], "seconds": 0.1,
                  "predicted_answer": f"v{i}" if rng.random() < (0.9 if method == "no_press" else 0.5) else "no"}
                 for t in TASKS for i in range(n)]
        scores = score(pd.DataFrame(preds))
        folder = root / f"ruler__1024__{method}__{ratio:.2f}"
        folder.mkdir(parents=True)
        config = {"model": model, "length": 1024, "method": method, "ratio": ratio}
        (folder / "result.json").write_text(json.dumps({"config": config, "scores": scores,
                                                        "aggregate": scores["aggregate"], "predictions": preds}))


def tables(results, out) -> dict[str, bytes]:
    samples = load_samples(results)
    methods = ["frc", "snapkv", "chunkkv"]
    report.save_table(analysis.r088_table(samples).set_index(["model", "length"]), "table_ruler_r088", out)
    report.save_table(analysis.rank_table(samples, methods), "table_frc_rank", out)
    report.save_table(analysis.degradation_table(samples, 0.8, 0.88).set_index("method"), "table_degradation", out)
    report.save_table(claims.verdicts(samples, methods, 0.8, 0.88).set_index("claim"), "table_verdicts", out)
    report.save_table(precision_table(samples, sizes=[3, 6]).set_index("samples_per_task"), "table_precision", out)
    report.save_samples(samples, "03_ruler_grid", out)
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_two_checkouts_in_different_folders_write_byte_identical_tables(tmp_path):
    here = tmp_path / "home" / "me" / "cachecraft"
    write_grid(here / "data" / "results" / "grid" / "cpu", str(here / "data" / "models" / "tiny-ruler-llama"))
    there = tmp_path / "elsewhere" / "clone"
    shutil.copytree(here / "data", there / "data")  # the same results, as a clone in another folder writes them
    for path in (there / "data" / "results").rglob("result.json"):
        result = json.loads(path.read_text())
        result["config"]["model"] = str(there / "data" / "models" / "tiny-ruler-llama")
        path.write_text(json.dumps(result))
    one = tables(here / "data" / "results" / "grid" / "cpu", tmp_path / "out1")
    two = tables(there / "data" / "results" / "grid" / "cpu", tmp_path / "out2")
    assert len(one) == 16 and sorted(one) == sorted(two)
    assert [name for name in one if one[name] != two[name]] == []
    assert b"/home/me" not in one["samples/03_ruler_grid.csv.gz"]
