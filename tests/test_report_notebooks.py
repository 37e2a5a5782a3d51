"""``nan_as_none``: the helper notebooks 03 and 04 record intervals through (NaN where one sample per task gives
no interval must reach the record as null, other values unchanged)."""

import json
import math

import pandas as pd

from cachecraft_lib.report.notebooks import _finite, nan_as_none


def test_nan_becomes_none_and_numbers_stay():
    frame = pd.DataFrame({"aggregate": [0.5, 0.25], "lo": [math.nan, 0.1], "hi": [math.nan, 0.4]})
    records = nan_as_none(frame).to_dict("records")
    assert records == [{"aggregate": 0.5, "lo": None, "hi": None}, {"aggregate": 0.25, "lo": 0.1, "hi": 0.4}]
    assert json.dumps(_finite(records))  # what record() publishes: valid JSON with null, not "nan"
    assert nan_as_none(pd.Series([1.0, math.nan])).tolist() == [1.0, None]


def test_notebook_07s_renamed_snapkv_is_a_flagged_copy(tmp_path):
    """The copy notebook 07 shows the judges (``arena.judges.demo``) is a valid folder that the rule judge flags."""
    from cachecraft_lib.arena.judges import load_bundle, review
    from cachecraft_lib.arena.judges.demo import write_renamed_snapkv
    from cachecraft_lib.arena.submissions.folder import load_submission

    folder = write_renamed_snapkv(tmp_path / "echo-salience", "A")
    assert load_submission(folder).name == "echo-salience"
    assert "UNDISCLOSED_PRIOR_ART" in review(load_bundle(folder)).flags


def test_cell_settings_are_what_grid_cells_gives_every_cell():
    """Notebook 04 builds its own cells with ``cell_settings``: they must match the profile's grid cells."""
    from cachecraft_lib.grid import Cell
    from cachecraft_lib.grid.cells import cell_settings, grid_cells
    from cachecraft_lib.profiles import get_profile

    for name in ("smoke", "cpu"):
        profile = get_profile(name)
        for cell in grid_cells(profile):
            assert cell == Cell(cell.model, cell.length, cell.method, cell.ratio, **cell_settings(profile))
        assert cell_settings(profile, query_aware=not profile.query_aware)["query_aware"] is not profile.query_aware
