"""Figures of RULER scores (notebooks 00, 03, 04).

Prompt tokens per task, RULER against the compression ratio, the decomposition and ablation beside the paper's
numbers.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .values import as_plotted, plotted_value


def plot_prompt_tokens(use: pd.DataFrame, ax: plt.Axes | None = None) -> plt.Axes:
    """Prompt tokens per task (``ruler.stats.token_use`` rows with a ``length`` column), one bar per length;
    the whiskers span the samples' min to max, so a haystack that misses its budget shows."""
    ax = ax or plt.subplots(figsize=(8, 4))[1]
    sns.barplot(data=use, x="task", y="prompt_tokens", hue="length", ax=ax, errorbar=("pi", 100))
    ax.set(ylabel="prompt tokens", xlabel="")
    ax.tick_params(axis="x", rotation=60)
    return ax


def plot_ruler_vs_ratio(results: pd.DataFrame, colors: dict[str, str] | None = None) -> plt.Figure:
    """RULER aggregate against compression ratio, one panel per (model, length), FRC drawn thicker.

    With ``lo``/``hi`` columns (``analysis.curve_points``) each curve carries its 95% interval as a band,
    and no compression its interval as a grey span. The legend sits to the right of the panels, over no curve.
    """
    results = as_plotted(results, ("aggregate", "lo", "hi")).assign(model_name=results.model.map(lambda m: Path(m).name))
    bands = {"lo", "hi"} <= set(results.columns)
    lengths, models = sorted(results.length.unique()), sorted(results.model_name.unique())
    fig, axes = plt.subplots(len(models), len(lengths), figsize=(5.2 * len(lengths), 3.8 * len(models)),
                             squeeze=False)
    for i, model in enumerate(models):
        for j, length in enumerate(lengths):
            ax, cell = axes[i][j], results[(results.model_name == model) & (results.length == length)]
            for method, g in cell[cell.method != "no_press"].groupby("method"):
                g = g.sort_values("ratio")
                line, = ax.plot(g.ratio, g["aggregate"], marker="o", lw=2.2 if method == "frc" else 1.2,
                                color=(colors or {}).get(method), label=method)
                if bands:
                    ax.fill_between(g.ratio, g.lo, g.hi, color=line.get_color(), alpha=0.15, lw=0)
            full = cell[cell.method == "no_press"]
            if len(full):
                ax.axhline(full["aggregate"].iloc[0], color="#7f7f7f", ls="--", lw=1, label="no compression")
                if bands and full.lo.notna().iloc[0]:
                    ax.axhspan(full.lo.iloc[0], full.hi.iloc[0], color="#7f7f7f", alpha=0.1, lw=0)
            ax.set(title=f"{model}, {length} tokens", xlabel="compression ratio r", ylabel="RULER")
    if bands:
        axes[0][0].text(0.99, 0.99, "bands: 95% paired bootstrap over samples", transform=axes[0][0].transAxes,
                        fontsize=7, color="#555555", ha="right", va="top")
    labels = {}  # one legend for all panels, outside them, so it hides no curve
    for ax in axes.flat:
        labels.update(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.legend(list(labels.values()), list(labels), fontsize=8, loc="center left", bbox_to_anchor=(0.86, 0.5))
    return fig


def plot_here_vs_paper(frame: pd.DataFrame, no_compression: float, ax: plt.Axes | None = None,
                       title: str = "") -> plt.Axes:
    """One bar pair per configuration: ``here`` with its 95% interval (``here_lo``, ``here_hi``; none at one
    sample per task) beside the ``paper``'s number, and no compression here as a dashed line."""
    ax = ax or plt.subplots(figsize=(5.5, 3.8))[1]
    frame, no_compression = as_plotted(frame, ("here", "here_lo", "here_hi", "paper")), plotted_value(no_compression)
    errors = [(frame.here - frame.here_lo).fillna(0), (frame.here_hi - frame.here).fillna(0)]
    frame[["here", "paper"]].plot.barh(ax=ax, color=["#d62728", "#bbbbbb"])
    ax.errorbar(frame.here, [i - 0.125 for i in range(len(frame))], xerr=errors, fmt="none", ecolor="black",
                capsize=2, lw=0.8, label="95% interval (here)")
    ax.axvline(no_compression, color="#7f7f7f", ls="--", lw=1, label="no compression (here)")
    ax.set(title=title, xlabel="RULER")
    ax.legend(fontsize=8)
    return ax


def plot_decomposition(scorer: pd.DataFrame, ablation: pd.DataFrame, no_compression: float) -> plt.Figure:
    """Takeaway 2 side by side: scorer vs structure at r = 0.88 and the within-FRC ablation at r = 0.83
    (``analysis.compare_with_paper`` tables)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    plot_here_vs_paper(scorer, no_compression, axes[0], "scorer vs structure (r = 0.88)")
    plot_here_vs_paper(ablation, no_compression, axes[1], "ablation (r = 0.83)")
    if "paper_cell" in scorer.columns and len(scorer):  # the paper's bars: its cell, and how it relates to ours
        fig.suptitle(str(scorer.paper_cell.iloc[0]).replace("paper:", "grey bars (paper):"), fontsize=8,
                     color="#555555", y=1.0)
    fig.tight_layout()
    return fig
