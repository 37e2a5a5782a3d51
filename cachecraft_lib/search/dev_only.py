"""The search process never holds the arena's secret: a guard installed before anything is loaded.

Why: a search that could read the hidden test items (or the secret that draws them) could select on them, and
then its test number is no evidence. ``install`` makes the secret unreachable in this process, for the whole
class of ways to reach it rather than one: the secret's environment variables are removed (``splits.SECRET_ENV``,
``splits.SECRET_FILE_ENV``; a child process inherits the cleaned environment), ``splits.load_secret`` raises
``SecretUnreachable`` (every caller imports it from the module at call time; tested), and ``Arena.items`` refuses
any split but ``dev``, so a secret passed by hand cannot draw test items either; nor can the arena's own
functions derive a test seed or draw test items (``splits.test_seed``, ``items.split_seed``, ``items.board_items``
call ``splits.guard_split``, where the guard is registered). ``dev_fitness`` builds the search's ``BoardFitness``
only while the guard is active, so the guard is necessarily in place before the first item is loaded (issue 48:
the old test installed its guard after the fitness had loaded its items), and marks it ``guarded``: a
pre-registered ``board_search`` takes no other fitness (issue 49). ``board_search`` holds the guard for the whole
search, every child's evaluation included, also when called from Python without it (second red team).

What it cannot stop: code in this process reading the secret FILE by its path and re-implementing the HMAC by
hand. The guard closes the project's own paths to the test split, not a determined author's.

``dev_only()`` is the same guard as a context manager, for notebooks and tests that later need the secret in the
same process (notebook 08 submits after its search).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..arena.arena import Arena
from ..arena.boards import splits

SECRET_VARS = (splits.SECRET_ENV, splits.SECRET_FILE_ENV)


class SecretUnreachable(RuntimeError):
    """Something in the search process asked for the arena's secret or the test items."""


@dataclass
class Guard:
    """What ``install`` changed, to put back on ``uninstall``: the removed variables and the replaced functions."""

    removed: dict[str, str] = field(default_factory=dict)
    load_secret: Any = None
    items: Any = None
    split_guard: Any = None  # registered in ``splits.SPLIT_GUARDS`` while installed


_active: list[Guard] = []


def _refused(*_args: Any, **_kwargs: Any) -> bytes:
    raise SecretUnreachable("the search process never holds the arena's secret (search.dev_only): only "
                            "`cachecraft arena submit-search`, run after the search, reads it")


def _dev_split_only(split: str) -> None:
    if split != "dev":
        raise SecretUnreachable(f"the search reads only the dev split, not {split!r}: no test seed is derived and no "
                                "test item drawn in the search process (search.dev_only)")


def _dev_items_only(original: Any) -> Any:
    def items(self: Arena, board: Any, split: str, *args: Any, **kwargs: Any) -> Any:
        if split != "dev":
            raise SecretUnreachable(f"the search reads only the dev items, not the {split!r} split (search.dev_only)")
        return original(self, board, split, *args, **kwargs)

    items.__wrapped__ = original
    return items


def active() -> bool:
    """Is the guard in place in this process?"""
    return bool(_active)


def install() -> Guard:
    """Remove the secret's variables and make the secret and the test split unreachable (idempotent)."""
    if _active:
        return _active[-1]
    guard = Guard({k: os.environ.pop(k) for k in SECRET_VARS if k in os.environ}, splits.load_secret, Arena.items,
                  _dev_split_only)
    splits.load_secret = _refused
    Arena.items = _dev_items_only(guard.items)
    splits.SPLIT_GUARDS.append(guard.split_guard)
    _active.append(guard)
    return guard


def uninstall(guard: Guard) -> None:
    """Put back what ``install`` changed (the environment variables too)."""
    if guard not in _active:
        return
    _active.remove(guard)
    splits.load_secret = guard.load_secret
    Arena.items = guard.items
    if guard.split_guard in splits.SPLIT_GUARDS:
        splits.SPLIT_GUARDS.remove(guard.split_guard)
    os.environ.update(guard.removed)


@contextmanager
def dev_only() -> Iterator[Guard]:
    """The guard for the duration of a ``with`` block (left in place when it was installed before the block)."""
    outer = active()
    guard = install()
    try:
        yield guard
    finally:
        if not outer:
            uninstall(guard)


def dev_fitness(board: str, profile: str = "cpu", root: str | Path | None = None,
                seed_program: str | Path | None = None, gate: float | None = None,
                contexts: Sequence[str] | None = None, arena: Arena | None = None) -> Any:
    """The search's fitness, built only behind the guard. It loads, in order: the board's dev items (public
    seed, no secret), the profile's model, the dev baselines (cached in ``root``), and runs ``seed_program`` on
    the gate items to set the gate (unless ``gate`` is given); ``contexts`` restricts all of it to those dev
    contexts (the search half: ``selection.split_dev``). The fitness comes back marked ``guarded``, the mark a
    pre-registered ``board_search`` requires (a ``BoardFitness`` built from parts has none)."""
    from .board_fitness import load_board_fitness

    if not active():
        raise SecretUnreachable("install the dev-only guard (search.dev_only.install) before building the "
                                "search's fitness: it must be in place before any item is loaded")
    fitness = load_board_fitness(board, profile, root=root, seed_program=seed_program, gate=gate, contexts=contexts,
                                 arena=arena)
    fitness.guarded = True
    return fitness
