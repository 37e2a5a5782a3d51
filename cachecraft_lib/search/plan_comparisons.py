"""What a search plan compares its programs with, named before the run (issue 56, item 1c).

Why: a comparison chosen after the test numbers exist is no pre-registered evidence (the StreamingLLM comparison
of the B_offline run was added afterwards). A plan therefore names its comparators (FRC and the selection half's
best baseline, a role filled from dev items alone) and its controls (the seed program on the same test items;
random search over the same program space at the search's budget, ``search.random_control``); ``preregister``
refuses a plan without comparators (``MissingComparators``).
"""

from __future__ import annotations

from typing import Any

FRC = "frc"
SELECTION_BEST = "best baseline of the selection half"  # which one: read from the dev items' selection half only
DEFAULT_COMPARATORS = (FRC, SELECTION_BEST)
SEED_CONTROL = "seed program"  # the unsearched seed, scored on the same test items
RANDOM_CONTROL = "random search at the search's budget"  # search.random_control, generations x population programs
DEFAULT_CONTROLS = (SEED_CONTROL, RANDOM_CONTROL)


class MissingComparators(ValueError):
    """A plan that does not name what the search will be compared with: refused before anything is recorded."""


def check_comparisons(comparators: Any, controls: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The plan's comparators and controls as tuples of names; ``MissingComparators`` when it names no comparator
    (or names one twice), ``ValueError`` for a control this library does not run."""
    names = tuple(str(c).strip() for c in (comparators or ()))
    if not names or not all(names) or len(set(names)) != len(names):
        raise MissingComparators(
            f"a plan must name its comparators before the run (got {list(comparators or [])}): what every seed's "
            f"program will be compared with on the test items, e.g. {list(DEFAULT_COMPARATORS)}; a comparison "
            "chosen after the test numbers exist is no pre-registered evidence")
    runs = tuple(str(c) for c in (controls or ()))
    unknown = sorted(set(runs) - set(DEFAULT_CONTROLS))
    if unknown:
        raise ValueError(f"unknown control(s) {unknown}: the controls are {list(DEFAULT_CONTROLS)}")
    return names, runs
