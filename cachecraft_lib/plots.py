"""Small plotting functions that take an axis (or make a figure) and return it; notebooks compose them."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .features import FEATURES


def shade_span(ax: plt.Axes, span: tuple[int, int] | None, label: str, color: str = "#d62728") -> None:
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


def plot_ruler_vs_ratio(results: pd.DataFrame, colors: dict[str, str] | None = None) -> plt.Figure:
    """RULER aggregate against compression ratio, one panel per (model, length), FRC drawn thicker.

    With ``lo``/``hi`` columns (``analysis.curve_points``) each curve carries its 95% interval as a band,
    and no compression its interval as a grey span.
    """
    from pathlib import Path

    results = results.assign(model_name=results.model.map(lambda m: Path(m).name))
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
    axes[0][-1].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def plot_best_so_far(trace: pd.DataFrame, ax: plt.Axes | None = None) -> plt.Axes:
    """Best fitness so far per island and over all islands, against iteration."""
    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    for island, g in trace.groupby("island"):
        ax.step(g.iteration, g.island_best_so_far, where="post", label=f"island {island}")
    ax.step(trace.iteration, trace.best_so_far, where="post", color="black", lw=2, label="all islands")
    ax.set(xlabel="iteration", ylabel="best fitness so far", title="best-so-far")
    ax.legend(fontsize=8)
    return ax


def plot_weight_trajectory(traj: pd.DataFrame, features: tuple[str, ...], ax: plt.Axes | None = None) -> plt.Axes:
    """Weights of FRC-family programs against iteration."""
    ax = ax or plt.subplots(figsize=(7, 3.4))[1]
    for f in features if len(traj) else ():
        ax.plot(traj.iteration, traj[f], marker="o", ms=3, label=f)
    ax.set(xlabel="iteration", ylabel="weight", title="FRC-family weights")
    if len(traj):
        ax.legend(fontsize=8)
    return ax
