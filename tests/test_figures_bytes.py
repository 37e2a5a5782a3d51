"""A correct rerun leaves the committed figures byte-identical (docs/reproducing.md): ``savefig`` writes nothing
that depends on the clock, notebook 01's features figure regenerates to the same bytes at another thread count,
and the score plots absorb last-bit noise in the numbers they draw."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from cachecraft_lib.report import figures as report  # noqa: E402
from cachecraft_lib.report import plots  # noqa: E402


def _bytes(paths):
    return {p.suffix: p.read_bytes() for p in paths}


def test_savefig_writes_nothing_that_depends_on_the_clock(tmp_path, monkeypatch):
    """matplotlib stamps a PDF with the time (or $SOURCE_DATE_EPOCH) unless told not to."""
    saved = []
    for n, epoch in enumerate(("1000000000", "2000000000")):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [0.1, 0.5, 0.3])
        saved.append(_bytes(report.savefig("fig_clock", fig, out_dir=tmp_path / str(n), label="a label")))
        plt.close(fig)
    assert saved[0][".pdf"] == saved[1][".pdf"]
    assert saved[0][".png"] == saved[1][".png"]


def _scores(scale: float) -> pd.DataFrame:
    here = pd.Series([41.234567, 37.5, 12.0625], index=["frc", "v1_tokenwise", "frc_tokenwise"]) * scale
    return pd.DataFrame({"here": here, "here_lo": here - 3.3 * scale, "here_hi": here + 2.7 * scale,
                         "paper": [45.1, 40.2, 20.3]})


def test_score_plots_absorb_last_bit_noise(tmp_path):
    """The same means summed in another order differ in their last bits; the drawn marks must not."""
    saved = []
    for n, scale in enumerate((1.0, 1.0 + 3e-9)):
        fig = plots.plot_decomposition(_scores(scale), _scores(scale), no_compression=50.0 * scale)
        saved.append(_bytes(report.savefig("fig_noise", fig, out_dir=tmp_path / str(n))))
        plt.close(fig)
    assert saved[0][".pdf"] == saved[1][".pdf"]
    assert saved[0][".png"] == saved[1][".png"]


def _features_figure(out_dir, threads: int) -> dict[str, bytes]:
    """Notebook 01's ``fig_features_along_sequence`` as its cells make it, at the smoke profile."""
    import torch

    from cachecraft_lib import ruler
    from cachecraft_lib.models.loading import load_model
    from cachecraft_lib.profiles import get_profile
    from cachecraft_lib.report.inspection import features_frame, inspect_prefill

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        profile = get_profile("smoke")
        report.set_style()
        model, tokenizer = load_model(profile.models[0], device=profile.device, dtype=profile.dtype)
        row = ruler.load(profile.lengths[0], tokenizer, source=profile.ruler_source, samples_per_task=1,
                         seed=profile.seed, tasks=["niah_single_2"]).iloc[0]
        views = inspect_prefill(model, tokenizer, row.context, 0.88, profile.feature_queries, profile.feature_window)
        fig = plots.plot_features(features_frame(views[len(views) // 2]), needle=(10, 20), question_at=views[0].ctx.L)
        saved = _bytes(report.savefig("fig_features_along_sequence", fig, out_dir=out_dir, label=profile.label))
        plt.close(fig)
        return saved
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_notebook_01_features_figure_regenerates_byte_identical(tmp_path, monkeypatch):
    """Twice from the model, at one thread and at two, a clock apart: the same PNG and PDF bytes."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1000000000")
    first = _features_figure(tmp_path / "first", threads=1)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "2000000000")
    second = _features_figure(tmp_path / "second", threads=2)
    assert first[".png"] == second[".png"]
    assert first[".pdf"] == second[".pdf"]
