"""The tables and claims built on the paired bootstrap, on synthetic per-sample results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.paper import analysis, claims
from cachecraft_lib.stats.intervals import CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE, REPRODUCED, VERDICTS

STAND_IN = "/x/tiny-ruler-llama"
TASKS = ("niah_single_1", "vt", "qa_1")


def samples(means: dict[tuple[str, float], float], n: int = 10, noise: float = 3.0, model: str = STAND_IN,
            lengths: tuple[int, ...] = (1024, 2048), seed: int = 0) -> pd.DataFrame:
    """Per-sample scores: each sample has a difficulty shared by every method, plus small per-method noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for length in lengths:
        difficulty = {t: rng.normal(0, 15, n) for t in TASKS}
        for (method, ratio), mean in means.items():
            cell = f"{length}_{method}_{ratio}"
            for task in TASKS:
                values = np.clip(mean + difficulty[task] + rng.normal(0, noise, n), 0, 100)
                rows += [{"cell": cell, "model": model, "length": length, "method": method, "ratio": ratio,
                          "task": task, "index": i, "score": float(v)} for i, v in enumerate(values)]
    return pd.DataFrame(rows)


GRID = {("no_press", 0.0): 80, ("frc", 0.5): 70, ("snapkv", 0.5): 70.5, ("chunkkv", 0.5): 40,
        ("frc", 0.8): 65, ("snapkv", 0.8): 50, ("chunkkv", 0.8): 55,
        ("frc", 0.88): 60, ("snapkv", 0.88): 30, ("chunkkv", 0.88): 35}
METHODS = ["frc", "snapkv", "chunkkv"]


def test_rank_is_shared_when_the_difference_includes_zero():
    ranks = analysis.rank_table(samples(GRID), METHODS).set_index(["length", "ratio"])
    tied = ranks.loc[(1024, 0.5)]  # FRC 70 vs SnapKV 70.5: indistinguishable; ChunkKV 40 far below
    assert tied.frc_rank_range == "1-2" and tied.shares_rank_with == "snapkv"
    clear = ranks.loc[(1024, 0.88)]
    assert clear.frc_rank_range == "1" and clear.shares_rank_with == ""
    assert (ranks.frc_lo <= ranks.frc).all() and (ranks.frc <= ranks.frc_hi).all()


def test_r088_one_row_per_measurement_with_both_paper_models_beside_it():
    """The stand-in is measured once per length: one row each, both paper models' columns side by side (a row
    per paper model repeated every measurement, read as two)."""
    table = analysis.r088_table(samples(GRID))
    assert len(table) == 2 and not table.duplicated(["model", "length"]).any()
    row = table.set_index("length").loc[1024]
    assert row.paper_llama_length == 4096 and row.paper_llama_frc == 84.5 and row.paper_llama_best == "chunkkv 69.2"
    assert row.paper_llama_gain == 15.4 and row.paper_qwen_frc == 77.6 and row.paper_qwen_best == "expected_attention 72.0"
    assert "1024 <-> 4096" in row.correspondence and "not a match" in row.correspondence
    assert "Llama-3.1-8B-Instruct and Qwen3-8B" in row.correspondence and "measured once" in row.correspondence
    qwen = table.set_index("length").loc[2048]
    assert qwen.paper_qwen_length == 8192 and qwen.paper_qwen_no_press == 93.9 and qwen.paper_llama_no_press == 94.6
    assert row.best_baseline == "chunkkv" and row.gain_lo <= row.gain <= row.gain_hi
    assert row.gain == pytest.approx(25, abs=3) and row.gain_verdict == REPRODUCED
    assert not [c for c in table.columns if c.startswith("paper_") and not c.startswith(("paper_llama_", "paper_qwen_"))]


def test_r088_of_the_paper_models_faces_each_its_own_cell():
    """Paper profile: each (model, length) row fills its own model's paper columns only, once."""
    grid = pd.concat([samples(GRID, model=m, lengths=(4096, 8192), seed=k) for k, m in
                      enumerate(("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"))], ignore_index=True)
    grid["cell"] = grid.model.str.split("/").str[0] + "_" + grid.cell
    table = analysis.r088_table(grid).set_index(["model", "length"])
    assert len(table) == 4 and not table.index.duplicated().any()
    llama, qwen = table.loc[("Llama-3.1-8B-Instruct", 4096)], table.loc[("Qwen3-8B", 8192)]
    assert llama.correspondence == "same model and length (paper_llama_*)"
    assert llama.paper_llama_no_press == 95.8 and llama.paper_llama_length == 4096 and np.isnan(llama.paper_qwen_frc)
    assert qwen.paper_qwen_frc == 88.6 and qwen.paper_qwen_best == "chunkkv 74.7" and np.isnan(qwen.paper_llama_frc)
    assert table.loc[("Llama-3.1-8B-Instruct", 4096)].paper_llama_gain_note.startswith("the paper's own 84.5")


def test_degradation_has_intervals():
    deg = analysis.degradation_table(samples(GRID), 0.8, 0.88).set_index("method")
    assert deg.loc["frc", "drop_0.80_to_0.88"] == pytest.approx(5, abs=2)
    assert (deg.lo <= deg["drop_0.80_to_0.88"]).all() and (deg["drop_0.80_to_0.88"] <= deg.hi).all()
    assert deg.loc["chunkkv", "paper_drop"] == "~14" and deg.loc["frc", "paper_drop"] == "~7"  # approximate, as quoted
    assert deg.loc["snapkv", "paper_drop"] == ""


def test_per_task_table_has_intervals_and_its_length():
    table = analysis.per_task_table(samples(GRID), STAND_IN, 1024, 0.88)
    assert list(table.index) == [*TASKS, "aggregate"] and set(table.length) == {1024} and set(table.n) == {10}
    assert list(table.columns[2:]) == ["chunkkv", "frc", "no_press", "snapkv"]
    assert all("[" in v and "]" in v for v in table.frc)  # point [lo, hi]
    boot = __import__("cachecraft_lib.stats.intervals", fromlist=["x"]).paired_bootstrap(samples(GRID))
    assert table.loc["aggregate", "frc"] == analysis.fmt(boot.mean("1024_frc_0.88"))


def test_decomposition_tables_say_the_paper_column_is_a_correspondence():
    grid = samples({("no_press", 0.0): 80, ("frc", 0.88): 60, ("v1_tokenwise", 0.88): 30,
                    ("frc_tokenwise", 0.88): 58}, lengths=(1024,))
    table = analysis.compare_with_paper(grid, ["v1_tokenwise", "frc", "frc_tokenwise"], 0.88, "decomposition")
    assert set(table.paper_cell) == {"paper: Llama-3.1-8B-Instruct at 4096; correspondence, not a match: "
                                     "tiny-ruler-llama at 1024 stands in for it"}
    assert analysis.paper_cell_note("meta-llama/Llama-3.1-8B-Instruct", 4096).endswith("same model and length")


def test_takeaway1_verdicts_are_three_valued():
    v = claims.verdicts(samples(GRID), METHODS, 0.8, 0.88).set_index("claim")
    assert set(v.verdict) <= set(VERDICTS)
    best = v.loc["FRC is the best compressed method in every cell with r >= 0.75"]
    assert best.verdict == REPRODUCED
    assert v.loc["At r <= 0.50 all methods are within about 1 point (ties)"].verdict == CONTRADICTED
    assert v.loc["From r = 0.8 to 0.88 FRC degrades least"].verdict == REPRODUCED


def test_takeaway1_inconclusive_when_methods_overlap():
    close = {("no_press", 0.0): 80, ("frc", 0.88): 60, ("snapkv", 0.88): 59, ("chunkkv", 0.88): 58.5}
    v = claims.verdicts(samples(close, n=4, noise=8, lengths=(1024,)), METHODS, 0.8, 0.88).set_index("claim")
    best = v.loc["FRC is the best compressed method in every cell with r >= 0.75"]
    assert best.verdict == INCONCLUSIVE and best.needed_per_task > 4


def test_not_measurable_when_no_compression_fails():
    weak = {k: 10.0 for k in GRID}
    v = claims.verdicts(samples(weak, noise=1), METHODS, 0.8, 0.88)
    assert list(v.verdict) == [NOT_MEASURABLE]


def test_decomposition_verdicts():
    grid = {("no_press", 0.0): 80, ("v1_tokenwise", 0.88): 20, ("frc", 0.88): 60, ("frc_tokenwise", 0.88): 60,
            ("frc", 0.83): 70, ("frc_no_maxhead", 0.83): 69.5, ("frc_no_density", 0.83): 60,
            ("frc_local_only", 0.83): 58, ("chunkkv", 0.83): 75}
    data = samples(grid, lengths=(1024,))
    v = claims.decomposition_verdicts(data)
    assert list(v.verdict) == [REPRODUCED, REPRODUCED, REPRODUCED, CONTRADICTED]
    table = analysis.compare_with_paper(data, ["frc", "frc_no_maxhead", "chunkkv"], 0.83, "ablation")
    assert table.loc["chunkkv", "paper"] == 85.10 and table.loc["frc", "delta_vs_first"] == 0
    assert table.loc["chunkkv", "delta_vs_first_lo"] > 0
    weak = claims.decomposition_verdicts(samples({k: 5.0 for k in grid}, lengths=(1024,), noise=1))
    assert set(weak.verdict) == {NOT_MEASURABLE}
    assert list(v.decides) == ["points", "points", "points", "points"]  # at 60-71% of the paper's level


def test_takeaway2_on_a_stand_in_far_below_the_paper_is_judged_on_a_scale_that_carries_over():
    """FRC 10.4 vs V1 4.7 (2.2x): 5.7 points misses "> 10 points", yet is far beyond the paper's ratio bar."""
    low = {("no_press", 0.0): 70, ("v1_tokenwise", 0.88): 4.7, ("frc", 0.88): 10.4, ("frc_tokenwise", 0.88): 10.4,
           ("frc", 0.83): 30, ("frc_no_maxhead", 0.83): 30, ("frc_no_density", 0.83): 25,
           ("frc_local_only", 0.83): 25, ("chunkkv", 0.83): 28}
    rng = np.random.default_rng(4)
    rows = [{"cell": f"{m}_{r}", "model": STAND_IN, "length": 1024, "method": m, "ratio": r, "task": t, "index": i,
             "score": float(np.clip(mean * (1 + 0.1 * rng.normal()), 0, 100))}
            for (m, r), mean in low.items() for t in TASKS for i in range(20)]
    v = claims.decomposition_verdicts(pd.DataFrame(rows)).set_index("claim")
    scorer = v.loc["the FRC scorer beats the V1 scorer by a wide margin (> 10 points)"]
    assert scorer.verdict_points == CONTRADICTED and scorer.verdict_relative == REPRODUCED
    assert scorer.decides == "relative" and scorer.verdict == REPRODUCED
    assert "ratio 2.2" in scorer.here and "> 1.575" in scorer.here  # (17.4 + 10) / 17.4
    chunk = v.loc["chunking adds little once the scorer is FRC (within 5 points)"]
    assert chunk.decides == "relative" and chunk.verdict == chunk.verdict_relative


def test_tables_refuse_the_summary():
    summary = pd.DataFrame([{"model": STAND_IN, "length": 1024, "method": "frc", "ratio": 0.88, "aggregate": 1}])
    with pytest.raises(TypeError, match="per-sample table"):
        analysis.rank_table(summary, METHODS)


def test_curve_points_and_mildest_loss():
    points = analysis.curve_points(samples(GRID))
    assert len(points) == 2 * len(GRID) and (points.lo <= points["aggregate"]).all()
    assert (points["aggregate"] <= points.hi).all()
    loss = claims.mildest_loss(samples(GRID)).set_index("length")
    assert loss.loc[1024, "ratio"] == 0.5 and loss.loc[1024, "best_method"] in {"frc", "snapkv"}  # 70 vs 70.5
    assert loss.loc[1024, "loss"] == pytest.approx(10, abs=2) and loss.loc[1024, "lo"] > 0


def test_kept_overlap_counts_shared_tokens_per_layer():
    from cachecraft_lib.paper.overlap import layer_overlap, overlap_summary, shared_by_layer

    ref, other = {0: {1, 2, 3, 4}, 1: {5, 6}}, {0: {1, 2, 3, 9}, 1: {5, 6}}
    rows = layer_overlap(ref, other)
    assert [(r["both"], r["shared"], r["identical"]) for r in rows] == [(3, 0.75, False), (2, 1.0, True)]
    per_layer = pd.DataFrame([{"method": "frc", "context": 0, **r} for r in layer_overlap(ref, ref)]
                             + [{"method": "variant", "context": 0, **r} for r in rows])
    summary = overlap_summary(per_layer)
    assert summary.loc["frc", "kept_shared_pct"] == 100 and summary.loc["frc", "identical_selections"] == "2/2"
    assert summary.loc["variant", "kept_shared_pct"] == pytest.approx(87.5)
    assert summary.loc["variant", "kept_shared_min_pct"] == 75 and summary.loc["variant", "identical_selections"] == "1/2"
    assert shared_by_layer(per_layer).loc["variant"].tolist() == [75.0, 100.0]
    with pytest.raises(ValueError, match="different layers"):
        layer_overlap(ref, {0: {1}})


def test_kept_overlap_of_the_ablation_on_the_embedded_model(tiny_model, tiny_rows):
    """One prefill per press: FRC against itself is identical; FRC with the local term only keeps other tokens;
    ChunkKV's press records nothing and is left out (a few seconds)."""
    from cachecraft_lib.paper.overlap import kept_overlap
    from cachecraft_lib.report.inspection import context_ids

    model, tok = tiny_model
    ids = [context_ids(tok, c) for c in tiny_rows.context[:2]]
    per_layer = kept_overlap(model, ids, ["frc", "frc_local_only", "chunkkv"], 0.83)
    layers = model.config.num_hidden_layers
    assert set(per_layer.method) == {"frc", "frc_local_only"} and len(per_layer) == 2 * 2 * layers
    frc, local = per_layer[per_layer.method == "frc"], per_layer[per_layer.method == "frc_local_only"]
    assert frc.identical.all() and (frc.shared == 1).all() and (frc.kept == frc.kept_reference).all()
    assert local.shared.between(0, 1).all() and not local.identical.all()
    assert (local.both <= local.kept_reference).all() and (local.kept_reference > 0).all()
