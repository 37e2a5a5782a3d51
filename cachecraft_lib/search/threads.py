"""Torch's thread count while the search scores programs (the engine, random search, the selection half).

Why: on two cores shared with the candidates' sandboxes, torch's default two threads spin-wait on each other: a
48-row decode took 29.4 CPU seconds on two threads and 1.5 on one, with bit-identical prefills, features and answers
(``benchmarks/bench_search.py`` checks the answers across thread settings).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

THREADS = 1  # torch threads while programs are scored


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Torch on ``n`` threads for the duration (``None``: as it is), restored after."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
