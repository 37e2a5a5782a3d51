"""Wall-clock readings that count a GPU's queued work.

CUDA kernels run asynchronously: ``time.perf_counter()`` read right after a launch measures the launch, not
the work, and the next synchronising call (``.item()``, a copy to the host) is charged for it. ``clock(device)``
waits for ``device`` to finish what it was given before reading the clock, so the seconds between two readings
are the seconds the work took; on a CPU it is ``perf_counter()`` and costs nothing.
"""

from __future__ import annotations

import time
from typing import Any

import torch


def sync(device: Any) -> None:
    """Wait for ``device``'s queued work when it is a CUDA device (a no-op otherwise)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def clock(device: Any) -> float:
    """``time.perf_counter()`` after the work queued on ``device`` is done."""
    sync(device)
    return time.perf_counter()
