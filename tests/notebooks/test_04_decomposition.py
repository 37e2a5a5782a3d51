"""Notebook 04 (decomposition, Takeaway 2) under the smoke profile, values asserted and the smoke run's pinned.

It runs with two samples per task (``SAMPLES=2``): the smoke profile's one sample per task gives no interval.
"""

from __future__ import annotations

import pytest

from cachecraft_lib.stats.intervals import VERDICTS


def inside(row: dict, point: str, lo: str, hi: str) -> bool:
    return row[lo] is not None and row[lo] - 1e-6 <= row[point] <= row[hi] + 1e-6


@pytest.mark.slow
def test_notebook_04_decomposition(smoke, figures, tmp_path):
    r = smoke("04", RESULTS=str(tmp_path / "dec"), SAMPLES=2)
    assert r["cells"] == 9 and r["samples_per_task"] == 2
    assert set(r["scorer"]) == {"v1_tokenwise", "frc", "frc_tokenwise"}
    assert set(r["ablation"]) == {"frc", "frc_no_maxhead", "frc_no_density", "frc_local_only", "chunkkv"}
    for ci in (r["scorer_ci"], r["ablation_ci"]):
        assert all(inside(row, "here", "here_lo", "here_hi") for row in ci.values())
    assert len(r["verdicts"]) == 4 and set(r["verdicts"]) <= set(VERDICTS)
    if r["no_press"] < 25:
        assert set(r["verdicts"]) == {"not measurable here"}
    # the smoke run's values (embedded model, 2 samples of 4 tasks at 1024 tokens) and their seeded intervals
    assert r["no_press"] == pytest.approx(77.5)
    assert r["scorer_ci"] == {m: pytest.approx({"here": 0.0, "here_lo": 0.0, "here_hi": 0.0}) for m in r["scorer"]}
    assert r["ablation_ci"] == {
        "frc": pytest.approx({"here": 12.5, "here_lo": 0.0, "here_hi": 25.0}),
        "frc_no_maxhead": pytest.approx({"here": 12.5, "here_lo": 0.0, "here_hi": 25.0}),
        "frc_no_density": pytest.approx({"here": 2.5, "here_lo": 0.0, "here_hi": 5.0}),
        "frc_local_only": pytest.approx({"here": 2.5, "here_lo": 0.0, "here_hi": 5.0}),
        "chunkkv": pytest.approx({"here": 0.0, "here_lo": 0.0, "here_hi": 0.0})}
    # FRC and V1 both score 0 at r = 0.88: a difference in points is decided (0 < 10), a ratio 0 / 0 is not; at 0%
    # of the paper's level the ratio decides, so the two scorer claims stay open
    assert r["verdicts"] == ["inconclusive at this sample size"] * 4
    assert r["needed_per_task"] == [None, None, 10, 5]  # for 80% power (a half-width scaled to the distance: 5, 3)
    assert (figures / "fig_decomposition.png").exists()
