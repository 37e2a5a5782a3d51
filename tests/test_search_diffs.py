"""The board search applies SEARCH/REPLACE edits with OpenEvolve's parser: every block, in order, and an edit that
does not fit the program is refused rather than applied in part or skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachecraft_lib.search.board_fitness import apply_diff, offline_population

SEEDS = Path(__file__).resolve().parents[1] / "cachecraft_lib" / "search" / "seeds"


def _block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def test_every_block_applies_in_order():
    source = "a = 1\nb = 2\n"
    assert apply_diff(source, _block("a = 1", "a = 3") + _block("b = 2", "b = a")) == "a = 3\nb = a\n"


@pytest.mark.parametrize("diff", [
    _block("c = 1", "c = 2"),  # the SEARCH text is not in the program
    _block("a = 1", "a = 2") + "=======\n",  # a stray delimiter after the block
    "<<<<<<< SEARCH\na = 1\n=======\na = 2\n",  # no closing REPLACE line
    _block("a = 1", "a = 2\n=======\nb = 9"),  # a second separator inside the block
])
def test_an_edit_that_does_not_fit_is_refused(diff):
    with pytest.raises(ValueError):
        apply_diff("a = 1\n", diff)


def test_the_offline_population_is_distinct_programs_of_the_seed():
    seed = (SEEDS / "v1_generic_seed.py").read_text()
    programs = offline_population(seed, 6, random_seed=3)
    assert len(set(programs)) == 6 and seed not in programs
    assert programs == offline_population(seed, 6, random_seed=3)
