"""Notebook 00 under the smoke profile: RULER loads, fills its budget, and the scorer agrees with the data."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_notebook_00_smoke(smoke, figures):
    r = smoke("00")
    assert r["profile"] == "smoke" and r["source"] == "offline"
    assert r["rows"] == {"1024": 13, "2048": 13}  # 13 tasks x 1 sample at each smoke length
    assert r["min_budget_used"] >= 0.9
    assert r["min_budget_used"] == pytest.approx(0.93359375)  # the smoke data is generated from a fixed seed
    assert r["oracle"] == {"1024": 100.0, "2048": 100.0} and r["empty"] == {"1024": 0.0, "2048": 0.0}
    assert (figures / "fig_ruler_tokens.png").exists()
    assert (figures / "table_ruler_tasks.md").read_text().count("|") > 50
