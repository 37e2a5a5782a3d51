"""Which boards a search runs on, read from the board files (a light module: the CLI builds its help from it)."""

from __future__ import annotations

from typing import Any


def searchable(board: Any) -> bool:
    """Whether the search's board fitness covers ``board``: a prefill board not scored on MATH-500."""
    return not board.decode_time and board.benchmark != "math500"


def search_boards(profile: str = "cpu") -> tuple[str, ...]:
    """The boards a search can run on, from the profile's board file (not a list kept by hand)."""
    from ..arena.boards.boards import load_boards

    return tuple(name for name, b in load_boards(profile).items() if searchable(b))
