"""Which rows the grid decodes together: the compressed caches of several samples, not one sample's alone.

Why: a sample has at most 31 cells, so decoding sample by sample leaves a GPU running 31 rows a step, each step
paying the whole model's fixed cost (weights read, kernel launches). The arena already decodes the caches of many
contexts together (``arena.board_runner``); here the grid does the same: samples are compressed one after
another and their rows wait in a ``Waiting`` queue until ``DecodePlan.full`` says to decode them all at once
(``decode.decode_by_width``: rows of similar width in one loop, so a short cache is not padded to a long one).

How many samples wait: on CUDA, as many as fit in half the memory free when the group starts (the other half for
the decode's padded copy, sized by ``decode.default_batch_size`` from what is free then), at most
``MAX_SAMPLES``; on a CPU ``CPU_SAMPLES`` (measured: docs/journal/benchmarks.md). Each row's decode time is its share
of its decode, so per-cell seconds stay comparable with one sample at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .decode import RESERVE_BYTES, CacheRow

MAX_SAMPLES = 256  # on CUDA: samples held for one decode at most (an interruption loses at most these)
CPU_SAMPLES = 1  # on a CPU: samples per decode (benchmarks/grid_throughput.py --samples-per-decode; see module doc)


@dataclass
class Waiting:
    """Compressed rows not yet decoded: each with its job, its sample's index and its compression seconds."""

    jobs: list[Any] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    rows: list[CacheRow] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    nbytes: int = 0

    def add(self, job: Any, index: int, row: CacheRow, seconds: float) -> None:
        self.jobs.append(job)
        self.indices.append(index)
        self.rows.append(row)
        self.seconds.append(seconds)
        self.nbytes += row.nbytes()

    @property
    def samples(self) -> int:
        return len(set(self.indices))

    def clear(self) -> None:
        self.jobs, self.indices, self.rows, self.seconds, self.nbytes = [], [], [], [], 0


@dataclass(frozen=True)
class DecodePlan:
    """When the waiting rows are decoded: after ``samples`` samples, or once they hold ``max_bytes``."""

    samples: int
    max_bytes: int | None = None

    def full(self, waiting: Waiting) -> bool:
        return waiting.samples >= self.samples or (self.max_bytes is not None and waiting.nbytes >= self.max_bytes)


def decode_plan(device: torch.device, samples: int | None = None) -> DecodePlan:
    """``samples`` per decode if given (1 = sample by sample, the engine before cross-sample decoding); else on
    CUDA up to ``MAX_SAMPLES`` within half of the free memory, on a CPU ``CPU_SAMPLES``."""
    if samples is not None:
        if samples < 1:
            raise ValueError(f"samples_per_decode must be >= 1, got {samples}")
        return DecodePlan(samples)
    if device.type != "cuda":
        return DecodePlan(CPU_SAMPLES)
    free, _ = torch.cuda.mem_get_info(device)
    return DecodePlan(MAX_SAMPLES, max(0, free - RESERVE_BYTES) // 2)
