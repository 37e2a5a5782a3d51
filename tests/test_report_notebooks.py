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


def test_an_undecided_claim_says_which_way_it_leans():
    """The verdict tables of notebooks 03 and 04 carry ``leans`` beside ``needed_per_task`` for an open claim
    (both open Takeaway-1 claims lean against the paper on the cpu profile), and nothing for a decided one."""
    from cachecraft_lib.paper import claims
    from cachecraft_lib.stats.intervals import INCONCLUSIVE, REPRODUCED, Verdict

    assert claims.COLUMNS.index("leans") == claims.COLUMNS.index("verdict") + 1
    rows = [claims._row("c", "p", "h", Verdict(INCONCLUSIVE, 27, "against")),
            claims._row("c", "p", "h", Verdict(INCONCLUSIVE, 9, "for")), claims._row("c", "p", "h", Verdict(REPRODUCED))]
    table = claims._frame(rows)
    assert list(table.leans) == ["against the claim", "for the claim", ""]
    assert list(table.needed_per_task.astype(object).where(table.needed_per_task.notna(), None)) == [27, 9, None]


def test_the_papers_own_rounding_is_noted_beside_its_gain():
    """The paper prints +15.4 for Llama at 4096 where its own 84.5 - 69.2 = 15.3: the r = 0.88 table says so
    there, and only where the paper's numbers disagree."""
    from cachecraft_lib.paper.analysis import _paper_cell, gain_note, paper_numbers

    paper = paper_numbers("main_r088")
    notes = {(fam, n): _paper_cell(paper, fam, n)["gain_note"] for fam in ("llama", "qwen") for n in (4096, 8192)}
    assert notes.pop(("llama", 4096)) == "the paper's own 84.5 - 69.2 = 15.3; it prints +15.4"
    assert set(notes.values()) == {""}
    assert gain_note(84.5, 69.2, 15.3) == "" and gain_note(float("nan"), 1.0, 1.0) == ""


def _calls(source: str, name: str) -> list[str]:
    """Every ``name(...)`` call in ``source``, parentheses balanced."""
    out, start = [], source.find(name + "(")
    while start >= 0:
        depth, end = 0, start + len(name)
        while True:
            depth += {"(": 1, ")": -1}.get(source[end], 0)
            if depth == 0:
                break
            end += 1
        out.append(source[start:end + 1])
        start = source.find(name + "(", end)
    return out


def test_every_table_of_notebooks_00_to_06_is_labelled():
    """A table says what it measured (model, profile, split) or that it measures nothing: every ``save_table``
    in notebooks 00-06 passes ``label=`` (07 and 08 are checked by their own tests)."""
    from cachecraft_lib.report.notebooks import list_notebooks

    books = list_notebooks(["00", "01", "02", "03", "04", "05", "06"])
    assert len(books) == 7
    calls = [(book.name, call) for book in books for cell in json.loads(book.read_text())["cells"]
             if cell["cell_type"] == "code" for call in _calls("".join(cell["source"]), "save_table")]
    assert len(calls) >= 15
    assert [(name, call[:80]) for name, call in calls if "label=" not in call] == []
