"""Figures of a search run (notebook 05): best-so-far and the FRC-family weights against iteration."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


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
