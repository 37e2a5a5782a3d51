"""Figures of the prefill latency benchmark (notebook 06)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def plot_latency(samples: pd.DataFrame, methods: Sequence[str], colors: dict[str, str] | None = None) -> plt.Figure:
    """Prefill ms per context length and method, one panel per model (``latency.measure_samples`` rows):
    bars at the median over repeats, whiskers over the middle half (IQR), so the spread shows beside the level."""
    models = samples.model.nunique()
    fig, axes = plt.subplots(1, models, figsize=(6 * models, 3.8), squeeze=False)
    for ax, (name, g) in zip(axes[0], samples.groupby("model"), strict=True):
        sns.barplot(data=g, x="length", y="prefill_ms", hue="method", palette=colors, ax=ax,
                    hue_order=list(methods), estimator="median", errorbar=("pi", 50))
        ax.set(title=name, ylabel="prefill ms (median, IQR over repeats)", xlabel="context length")
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
