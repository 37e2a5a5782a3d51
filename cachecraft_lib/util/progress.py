"""Progress bars that reach whoever waits: notebook widgets in Jupyter, text in a terminal, and text lines in a
headless notebook run (``cachecraft reproduce``), where a widget would show nothing.

``run_notebook`` starts its kernels with ``CACHECRAFT_HEADLESS=1``; then ``tqdm`` here is tqdm's text bar on
stderr (which papermill forwards), shown only once a loop has run ``HEADLESS_DELAY`` seconds and refreshed at
most every ``HEADLESS_INTERVAL`` seconds, so the log gets a line with done/total, rate and time left for every
long loop and nothing for the short ones. In a headless run the bars show even where the caller passed
``disable=True`` (a notebook turning off its widgets): the log is the only place a reader can see progress.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HEADLESS_ENV = "CACHECRAFT_HEADLESS"
HEADLESS_DELAY = 5.0
HEADLESS_INTERVAL = 20.0


def headless() -> bool:
    return os.environ.get(HEADLESS_ENV, "") not in ("", "0")


def tqdm(*args: Any, **kwargs: Any):
    """``tqdm.auto.tqdm`` interactively; in a headless run, a throttled text bar on stderr."""
    if not headless():
        from tqdm.auto import tqdm as auto

        return auto(*args, **kwargs)
    from tqdm.std import tqdm as text

    kwargs.update(disable=False, leave=True, file=sys.stderr, ascii=True, ncols=100)
    kwargs.setdefault("delay", HEADLESS_DELAY)
    kwargs.setdefault("mininterval", HEADLESS_INTERVAL)
    return text(*args, **kwargs)
