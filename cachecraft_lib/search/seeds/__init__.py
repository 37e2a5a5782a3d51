"""Seed policy programs for the search, each with an EVOLVE-BLOCK around its editable part.

All four share one shape, a linear scorer the offline mutator can edit: ``FEATURES`` (names of the 17
context arrays), ``WEIGHTS``, ``SMOOTH`` (a moving-average window over the score) and ``SELECTION``
(``"tokenwise"`` top-K or ``"chunked"`` whole chunks).
"""

from pathlib import Path

SEEDS_DIR = Path(__file__).parent
SEEDS = {
    "v1": SEEDS_DIR / "v1_generic_seed.py",
    "chunkkv": SEEDS_DIR / "chunkkv_inspired.py",
    "v5": SEEDS_DIR / "v5_frc_family.py",
    "expected_attention": SEEDS_DIR / "expected_attention_style.py",
}


def seed_path(name: str) -> Path:
    if name in SEEDS:
        return SEEDS[name]
    path = Path(name)
    if path.is_file():
        return path
    raise ValueError(f"unknown seed {name!r}: choose {', '.join(SEEDS)} or give a program file")
