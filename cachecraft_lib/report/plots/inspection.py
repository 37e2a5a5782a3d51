"""Figures of one prefill looked into (notebooks 01, 02).

Features along the sequence, their correlation, kept tokens per layer, FRC step by step.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ...methods.features import FEATURES


def shade_span(ax: plt.Axes, span: tuple[int, int] | None, label: str, color: str = "#d62728") -> None:
    """Shade a token span (half-open [start, end)) on a position axis; nothing when there is none."""
    if span is not None:
        ax.axvspan(span[0] - 0.5, span[1] - 0.5, color=color, alpha=0.25, label=label, lw=0)


def plot_features(frame: pd.DataFrame, needle: tuple[int, int] | None = None, question_at: int | None = None,
                  ncols: int = 3) -> plt.Figure:
    """All 17 features along the sequence, one panel each, with the needle span and the question marked."""
    nrows = int(np.ceil(len(FEATURES) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 1.7 * nrows), sharex=True)
    for ax, name in zip(axes.flat, FEATURES, strict=False):
        ax.plot(frame.index, frame[name], lw=0.7, color="#333333")
        shade_span(ax, needle, "needle")
        if question_at is not None:
            ax.axvline(question_at, color="#1f77b4", ls="--", lw=0.8, label="question starts")
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(FEATURES):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize=8)
    fig.supxlabel("token position")
    fig.tight_layout()
    return fig


def plot_correlation(corr: pd.DataFrame, ax: plt.Axes | None = None) -> plt.Axes:
    ax = ax or plt.subplots(figsize=(7.5, 6.2))[1]
    sns.heatmap(corr, cmap="vlag", vmin=-1, vmax=1, square=True, ax=ax, cbar_kws={"shrink": 0.7},
                xticklabels=True, yticklabels=True)
    ax.tick_params(labelsize=7)
    return ax


def plot_kept_by_layer(kept: dict[int, np.ndarray], length: int, needle: tuple[int, int] | None = None,
                       ax: plt.Axes | None = None, title: str = "") -> plt.Axes:
    """One row per layer: kept tokens in colour, the needle span shaded."""
    ax = ax or plt.subplots(figsize=(8, 0.5 + 0.45 * len(kept)))[1]
    grid = np.zeros((len(kept), length))
    for row, layer in enumerate(sorted(kept)):
        grid[row, np.asarray(kept[layer])] = 1
    ax.imshow(grid, aspect="auto", cmap="Greys", interpolation="nearest", vmin=0, vmax=1.6,
              extent=(-0.5, length - 0.5, len(kept) - 0.5, -0.5))
    shade_span(ax, needle, "needle")
    ax.set(yticks=range(len(kept)), yticklabels=[f"layer {k}" for k in sorted(kept)], xlabel="token position",
           title=title)
    if needle is not None:
        ax.legend(loc="upper right", fontsize=8)
    return ax


def plot_frc_steps(breakdown: pd.DataFrame, needle: tuple[int, int] | None = None) -> plt.Figure:
    """Raw signals, normalised signals, token score and chunk score with the kept chunks."""
    fig, axes = plt.subplots(4, 1, figsize=(9, 8), sharex=True)
    for k in ("local", "density", "maxhead"):
        axes[0].plot(breakdown[f"{k}_raw"], lw=0.8, label=k)
        axes[1].plot(breakdown[f"{k}_norm"], lw=0.8, label=k)
    axes[0].set(title="1. raw signals (tail attention)", yscale="log")
    axes[1].set(title="2. MaxAbs-normalised")
    axes[2].plot(breakdown["score"], lw=0.8, color="#d62728")
    axes[2].set(title="3. s(t) = 0.55 local + 0.30 density + 0.15 maxhead")
    axes[3].step(breakdown.index, breakdown["chunk_score"], where="mid", lw=0.8, color="#333333")
    kept = breakdown.index[breakdown["kept"]]
    axes[3].scatter(kept, breakdown.loc[kept, "chunk_score"], s=3, color="#d62728", label="kept chunks")
    axes[3].set(title="4. chunk score (mean over 20 tokens) and the top chunks kept", xlabel="token position")
    for ax in axes:
        shade_span(ax, needle, "needle", color="#2ca02c")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
