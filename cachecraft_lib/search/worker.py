"""The worker's evaluator, built once per process from ``$CACHECRAFT_SEARCH_CONFIG``: the RULER cascade
(``cascade.CascadeEvaluator``) or, for ``cachecraft evolve --board``, the board's own dev score
(``board_fitness.BoardFitness``). OpenEvolve executes evaluator.py anew for every evaluation, so the cache
lives here, in a module imported once."""

from __future__ import annotations

import os
from pathlib import Path

from . import dev_only
from .cascade import CONFIG_ENV, CascadeEvaluator, SearchSettings

_EVALUATOR = None  # the worker's CascadeEvaluator, or its BoardFitness with --board


def get_evaluator():
    """The worker's evaluator, built once from ``$CACHECRAFT_SEARCH_CONFIG`` (OpenEvolve re-executes evaluator.py)."""
    global _EVALUATOR
    if _EVALUATOR is None:
        path = os.environ.get(CONFIG_ENV)
        if not path or not Path(path).is_file():
            raise RuntimeError(f"${CONFIG_ENV} must point to a search_config.json (written by `cachecraft evolve`)")
        settings = SearchSettings.from_file(path)
        _EVALUATOR = board_evaluator(settings) if settings.extras.get("board") else CascadeEvaluator(settings)
    return _EVALUATOR


def board_evaluator(settings: SearchSettings):
    """``cachecraft evolve --board``: the board's own dev score as the fitness (``board_fitness``), built by
    ``dev_only.dev_fitness`` behind the dev-only guard, installed first and left in place for this process
    (the search's driver or worker: it never needs the secret)."""
    dev_only.install()
    extras = settings.extras
    return dev_only.dev_fitness(extras["board"], profile=extras["profile"], root=extras.get("arena_root"),
                                seed_program=settings.seed_program, gate=settings.gate)
