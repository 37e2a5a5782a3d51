"""The notebooks' consistency checks: the scorer on perfect and empty answers, FRCPress against FRC's program."""

from __future__ import annotations

import pytest
import torch

from cachecraft_lib.methods.programs import FRC_PROGRAM, V1_PROGRAM
from cachecraft_lib.paper import consistency


def test_scorer_bounds_perfect_100_empty_0(ruler_1024):
    assert consistency.scorer_bounds({1024: ruler_1024}) == {1024: {"oracle": 100.0, "empty": 0.0}}


def test_scorer_bounds_names_the_task_whose_perfect_answer_fails(ruler_1024, monkeypatch):
    real = consistency.oracle_scores
    monkeypatch.setattr(consistency, "oracle_scores", lambda df: {**real(df), "vt": 75.0})
    with pytest.raises(ValueError, match=r"RULER 1024: perfect answers score \{'vt': 75.0\}"):
        consistency.scorer_bounds({1024: ruler_1024})


def test_frc_press_matches_its_program_and_not_another(tiny_model):
    model, _ = tiny_model
    ids = torch.randint(10, 200, (1, 130), generator=torch.Generator().manual_seed(0))
    same = consistency.frc_press_matches_program(model, ids, FRC_PROGRAM, [0.5, 0.88])
    assert same.ratio.tolist() == [0.5, 0.88] and same.identical.all()
    assert (same.layers == model.config.num_hidden_layers).all()
    assert same.kept_tokens.tolist() == [60, 20]  # 7 chunks (the last of 10 tokens, not kept): 3 and 1 kept
    other = consistency.frc_press_matches_program(model, ids, V1_PROGRAM, [0.5])  # tokenwise, other signals
    assert not other.identical.any()
