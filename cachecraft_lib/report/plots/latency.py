"""Figures of the prefill latency benchmark (notebook 06)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...stats.timing import median_interval


def plot_latency(samples: pd.DataFrame, methods: Sequence[str], colors: dict[str, str] | None = None) -> plt.Figure:
    """Prefill ms per context length and method, one panel per model (``latency.measure_samples`` rows):
    bars at the median over repeats, whiskers the median's order-statistic interval (``stats.timing``), the
    interval the latency tables give, its coverage named on the axis, so figure and table read alike."""
    models = samples.model.nunique()
    fig, axes = plt.subplots(1, models, figsize=(6 * models, 3.8), squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, (name, g) in zip(axes[0], samples.groupby("model"), strict=True):
        lengths, coverage = sorted(g.length.unique()), set()
        for k, method in enumerate(methods):
            spreads = [median_interval(g[(g.length == n) & (g.method == method)].prefill_ms.tolist()) for n in lengths]
            x = np.arange(len(lengths)) + (k - (len(methods) - 1) / 2) * width
            med = np.array([s.median for s in spreads])
            ax.bar(x, med, width, color=(colors or {}).get(method), label=method)
            errors = np.array([[s.median - s.lo for s in spreads], [s.hi - s.median for s in spreads]])
            ax.errorbar(x, med, yerr=np.nan_to_num(errors), fmt="none", ecolor="black", capsize=2, lw=1)
            coverage |= {s.coverage for s in spreads if s.n}
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
        levels = "/".join(f"{c:.0%}" for c in sorted(coverage))
        ax.set(title=name, xlabel="context length",
               ylabel=f"prefill ms, median\n(whiskers: its {levels} interval, as in the tables)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
