"""Plotted numbers rounded to what the data support, so float noise in the last bits never moves a drawn mark.

A score's mean or interval end computed in another summation order differs in its last bits; a PDF writes
coordinates to ten decimals, so such noise changed ``fig_decomposition.pdf`` between correct runs while the
tables (rounded) stayed identical. Rounding to ``DECIMALS`` (far below a pixel on any score axis) makes those
marks byte-stable. Not for dense lines (features along a sequence): rounding a curve whose values really differ
turns tiny shifts into step changes at rounding boundaries (measured: 1,214 pixels changed instead of 194 under
1e-6 relative noise), so those figures rely on a deterministic computation instead (docs/reproducing.md).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

DECIMALS = 4  # scores are 0-1 or 0-100: 1e-4 is below a pixel on either axis


def as_plotted(frame: pd.DataFrame, columns: Iterable[str], decimals: int = DECIMALS) -> pd.DataFrame:
    """``frame`` with the named numeric columns (those present) rounded for drawing; other columns unchanged."""
    present = [c for c in columns if c in frame.columns]
    return frame.assign(**{c: pd.to_numeric(frame[c], errors="coerce").round(decimals) for c in present})


def plotted_value(value: float, decimals: int = DECIMALS) -> float:
    """One number rounded as ``as_plotted`` rounds a column (a reference line, a span)."""
    return round(float(value), decimals)
