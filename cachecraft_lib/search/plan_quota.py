"""A pre-registered run checks, before it starts, that its author may enter every seed (issue 56, item 2).

Why: the arena's rate limit is 5 counted events (entries and rejections) per author per 24 hours, exactly the
five seeds of notebook 08's cpu plan. A plan recorded while its author already had an entry in the window would
run hours of search and then be refused at its fifth seed: half a pre-registered design, with the seeds that
got in chosen by the clock. ``check_room`` refuses such a plan before it is recorded (nothing written, nothing
run), and ``entries_left`` is asked again just before the secret is drawn. The limit itself is unchanged for
everyone: this only refuses earlier, never admits more.

A retry of the notebook in the same arena within 24 hours therefore stops at its plan, not half-way (and a second
plan of the same family could not claim those seeds anyway: ``arena.scoring.claims``); with no ``ROOT`` the
notebook makes a fresh arena, whose ledger is empty.
"""

from __future__ import annotations

from typing import Any


class NoRoomForPlan(ValueError):
    """The plan's author cannot enter one program per seed within the rate limit now."""


def entries_left(ledger: Any, author: str) -> int:
    """How many more counted events ``author`` may make now (``Ledger.quota``: the arena's own count)."""
    return int(ledger.quota(author))


def check_room(ledger: Any, author: str, seeds: int) -> int:
    """``NoRoomForPlan`` unless ``author`` has room for ``seeds`` entries now; returns the room."""
    room = entries_left(ledger, author)
    if room < seeds:
        raise NoRoomForPlan(
            f"{author} may enter {room} more program(s) in the rate limit's window now, and the plan has {seeds} "
            "seeds (one entry each): it would be refused half-way. Wait until the window has room for every seed, "
            "register fewer seeds, or use a fresh arena")
    return room
