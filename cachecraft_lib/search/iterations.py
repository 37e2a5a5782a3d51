"""A progress bar over a search's iterations, fed by OpenEvolve's own "Iteration N: ..." log records.

OpenEvolve reports each finished iteration through ``logging`` (and puts a console handler at INFO on the root
logger). ``iteration_bar`` turns those records into one bar (done of total, rate, time left) through
``cachecraft_lib.util.progress``; in a headless run (``cachecraft reproduce``) it also lowers OpenEvolve's console
handlers to warnings, so the log shows the bar instead of five INFO lines per iteration (the run's log file
under ``<out>/logs`` keeps every line).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..util.progress import headless, tqdm

ITERATION_RE = re.compile(r"^Iteration (\d+):")


class _Iterations(logging.Handler):
    def __init__(self, bar, first: int) -> None:
        super().__init__(logging.INFO)
        self.bar, self.first = bar, first

    def emit(self, record: logging.LogRecord) -> None:
        match = ITERATION_RE.match(str(record.msg) if not record.args else record.getMessage())
        if match:
            done = min(self.bar.total, int(match.group(1)) - self.first)
            if done > self.bar.n:
                self.bar.update(done - self.bar.n)


@contextmanager
def iteration_bar(total: int, first: int = 0, desc: str = "search iterations") -> Iterator[None]:
    """Count OpenEvolve's iterations ``first+1 .. first+total`` while the block runs."""
    bar = tqdm(total=total, desc=desc, unit="it")
    handler = _Iterations(bar, first)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        bar.close()


def quiet_console() -> None:
    """In a headless run, OpenEvolve's console handlers show warnings only (the bar shows progress)."""
    if not headless():
        return
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:
            handler.setLevel(logging.WARNING)
