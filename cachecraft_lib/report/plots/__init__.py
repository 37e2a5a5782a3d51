"""Small plotting functions that take an axis (or make a figure) and return it, one module per kind of result.

Notebooks compose them and save through ``report.savefig``; every function is importable from here.
"""

from .arena import plot_leaderboard
from .inspection import plot_correlation, plot_features, plot_frc_steps, plot_kept_by_layer, shade_span
from .latency import plot_latency
from .ruler import plot_decomposition, plot_here_vs_paper, plot_prompt_tokens, plot_ruler_vs_ratio
from .search import plot_best_so_far, plot_weight_trajectory
from .search_arena import plot_search_arena_dynamics

__all__ = ["plot_best_so_far", "plot_correlation", "plot_decomposition", "plot_features", "plot_frc_steps",
           "plot_here_vs_paper", "plot_kept_by_layer", "plot_latency", "plot_leaderboard", "plot_prompt_tokens", "plot_ruler_vs_ratio",
           "plot_search_arena_dynamics", "plot_weight_trajectory", "shade_span"]
