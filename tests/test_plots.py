"""The plotting functions the notebooks call draw what their data says: one bar per row, one panel per model,
intervals where given (fast, synthetic frames)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from cachecraft_lib.report import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_prompt_tokens_one_bar_per_task_and_length():
    use = pd.DataFrame({"task": ["vt", "vt", "qa_1", "qa_1"] * 2, "prompt_tokens": [900, 910, 880, 890] * 2,
                        "length": [1024] * 4 + [2048] * 4})
    use.loc[use.length == 2048, "prompt_tokens"] *= 2
    ax = plots.plot_prompt_tokens(use)
    heights = sorted(round(p.get_height()) for p in ax.patches if p.get_height() > 0)
    assert heights == [885, 905, 1770, 1810]  # the mean of each task's samples, per length
    assert ax.get_ylabel() == "prompt tokens"


def _here_vs_paper(here_lo: float | None) -> pd.DataFrame:
    return pd.DataFrame({"here": [10.0, 40.0], "here_lo": [here_lo, 30.0], "here_hi": [12.0, 50.0],
                         "paper": [17.4, 84.6]}, index=["v1_tokenwise", "frc"])


def test_here_vs_paper_bars_intervals_and_no_compression_line():
    ax = plots.plot_here_vs_paper(_here_vs_paper(8.0), no_compression=60.0, title="t")
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == pytest.approx([10.0, 17.4, 40.0, 84.6])
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [60.0]  # no compression
    segments = ax.collections[0].get_segments()  # the error bars: [here_lo, here_hi] per row
    assert [tuple(np.round(s[:, 0], 6)) for s in segments] == [(8.0, 12.0), (30.0, 50.0)]


def test_here_vs_paper_without_interval_draws_no_error_bar():
    ax = plots.plot_here_vs_paper(_here_vs_paper(None), no_compression=60.0)
    assert tuple(ax.collections[0].get_segments()[0][:, 0]) == (10.0, 12.0)  # lower side falls back to the point


def test_decomposition_two_panels():
    fig = plots.plot_decomposition(_here_vs_paper(8.0), _here_vs_paper(8.0), no_compression=60.0)
    assert [ax.get_title() for ax in fig.axes] == ["scorer vs structure (r = 0.88)", "ablation (r = 0.83)"]
    assert fig._suptitle is None  # no paper cell named, nothing claimed
    note = "paper: Llama-3.1-8B-Instruct at 4096; correspondence, not a match: tiny at 1024 stands in for it"
    fig = plots.plot_decomposition(_here_vs_paper(8.0).assign(paper_cell=note), _here_vs_paper(8.0), 60.0)
    assert "correspondence, not a match" in fig._suptitle.get_text()


def test_latency_one_panel_per_model_median_bars():
    rows = [{"model": model, "length": 1024, "method": method, "round": k, "prefill_ms": base + k}
            for model, base in (("tiny", 10.0), ("8b-shaped", 100.0))
            for method in ("no_press", "frc") for k in range(3)]
    fig = plots.plot_latency(pd.DataFrame(rows), ["no_press", "frc"], {"frc": "#d62728", "no_press": "#7f7f7f"})
    assert sorted(ax.get_title() for ax in fig.axes) == ["8b-shaped", "tiny"]
    for ax in fig.axes:
        base = 10.0 if ax.get_title() == "tiny" else 100.0
        assert sorted(p.get_height() for p in ax.patches if p.get_height() > 0) == pytest.approx([base + 1] * 2)
        # whiskers are the median's interval the latency tables give (stats.timing), its coverage named
        from cachecraft_lib.stats.timing import median_interval

        spread = median_interval([base, base + 1, base + 2])
        bars = [seg for c in ax.collections for seg in c.get_segments()]
        assert [y for s in bars for y in (min(s[:, 1]), max(s[:, 1]))] == pytest.approx([spread.lo, spread.hi] * 2)
        assert f"{spread.coverage:.0%} interval" in ax.get_ylabel()


def test_ruler_vs_ratio_legend_hides_no_curve():
    """One legend for the figure, right of every panel, naming each method once (it had sat inside the last
    panel, over two curves)."""
    rows = [{"model": "m/tiny", "length": n, "method": m, "ratio": r, "aggregate": 50.0 - 40 * r,
             "lo": 45.0 - 40 * r, "hi": 55.0 - 40 * r} for n in (1024, 2048) for m in ("frc", "snapkv")
            for r in (0.5, 0.88)] + [{"model": "m/tiny", "length": n, "method": "no_press", "ratio": 0.0,
                                      "aggregate": 60.0, "lo": 55.0, "hi": 65.0} for n in (1024, 2048)]
    fig = plots.plot_ruler_vs_ratio(pd.DataFrame(rows))
    fig.canvas.draw()
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["frc", "snapkv", "no compression"]
    box = legend.get_window_extent()
    assert all(box.x0 >= ax.get_window_extent().x1 for ax in fig.axes)  # beside the panels, over none of them


def _leaderboard() -> pd.DataFrame:
    rows = [("A", "frc", "submission", 0.80, 0.76, 0.84, True, ""), ("A", "echo", "submission", 0.54, 0.48, 0.60, True,
             "UNDISCLOSED_PRIOR_ART"), ("A", "tova", "baseline", 0.40, 0.34, 0.47, False, ""),
            ("C", "rkv", "baseline", 0.54, 0.41, 0.66, True, ""), ("C", "h2o", "baseline", 0.24, 0.14, 0.36, False, "")]
    return pd.DataFrame(rows, columns=["board", "name", "kind", "overall", "lo", "hi", "eligible", "flags"])


def test_leaderboard_labels_never_overprint_a_whisker():
    """Every note (not eligible, flagged) is in the entry's tick label, none in the data area where a whisker
    runs; each whisker spans its interval (the notes were drawn at the bar's end, inside the interval)."""
    board = _leaderboard()
    fig = plots.plot_leaderboard(board)
    fig.canvas.draw()
    for ax, name in zip(fig.axes, ("A", "C"), strict=True):
        rows = board[board.board == name].iloc[::-1]
        whiskers = {round(line.get_ydata()[0]): tuple(line.get_xdata()) for line in ax.lines}
        assert whiskers == {i: (r.lo, r.hi) for i, r in enumerate(rows.itertuples())}
        for text in ax.texts:  # anything written inside the panel must start beyond its row's whisker
            x, y = text.get_position()
            assert x > whiskers[round(y)][1], f"{text.get_text()!r} at x = {x} overprints its whisker"
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == [plots.arena.entry_label(r) for _, r in rows.iterrows()]
    a_labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert a_labels == ["tova (not eligible)", "echo (flagged: UNDISCLOSED_PRIOR_ART)", "frc"]
