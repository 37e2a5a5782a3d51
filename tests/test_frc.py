"""FRC's pure functions against a direct, loop-by-loop reading of the paper's equations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cachecraft_lib.methods import frc


def reference_scores(attn: np.ndarray, window: int, weights) -> np.ndarray:
    """The equations read literally, one token at a time (slow and obvious)."""
    n_kv, q, length = attn.shape
    w = min(window, q)
    local = np.array([attn[:, q - w:, t].mean() for t in range(length)])
    abar = np.array([attn[:, :, t].mean() for t in range(length)])
    wd = max(3, min(33, 2 * math.floor(length / 64) + 1))
    half = wd // 2
    dens = np.array([sum(abar[tau] for tau in range(t - half, t + half + 1) if 0 <= tau < length) / wd
                     for t in range(length)])
    maxhead = np.array([max(attn[g, :, t].mean() for g in range(n_kv)) for t in range(length)])

    def norm(f):
        m = np.abs(f).max()
        return f / m if m > 0 else f

    return weights[0] * norm(local) + weights[1] * norm(dens) + weights[2] * norm(maxhead)


def reference_chunks(scores: np.ndarray, ratio: float, lc: int) -> list[int]:
    length = len(scores)
    n_chunks = math.ceil(length / lc)
    means = [scores[c * lc:(c + 1) * lc].mean() for c in range(n_chunks)]
    n_keep = max(1, math.floor(n_chunks * (1 - ratio)))
    best = sorted(sorted(range(n_chunks), key=lambda c: -means[c])[:n_keep])
    return [t for c in best for t in range(c * lc, min((c + 1) * lc, length))]


def random_attention(n_kv: int, q: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n_kv, q, length, generator=g, dtype=torch.float64) * 3
    return logits.softmax(-1)


@pytest.mark.parametrize("n_kv,q,length", [(1, 64, 37), (4, 64, 50), (8, 64, 127), (2, 16, 64), (4, 64, 645)])
def test_token_scores_match_the_equations(n_kv, q, length):
    attn = random_attention(n_kv, q, length, seed=length)
    ours = frc.frc_token_scores(attn, window=32, weights=frc.FRC_WEIGHTS).numpy()
    assert np.allclose(ours, reference_scores(attn.numpy(), 32, frc.FRC_WEIGHTS), atol=1e-12)


@pytest.mark.parametrize("length,ratio", [(37, 0.5), (50, 0.88), (127, 0.75), (645, 0.88), (20, 0.25), (13, 0.9)])
def test_chunk_top_k_matches_the_rule(length, ratio):
    scores = torch.rand(length, generator=torch.Generator().manual_seed(length), dtype=torch.float64)
    idx = frc.chunk_top_k(scores, ratio, 20)
    assert idx.tolist() == reference_chunks(scores.numpy(), ratio, 20)
    assert idx.tolist() == sorted(set(idx.tolist()))


def test_density_uses_zero_padding_and_divides_by_wd():
    abar = torch.ones(10, dtype=torch.float64)
    d = frc.density(abar, wd=3)
    assert d[0].item() == pytest.approx(2 / 3) and d[5].item() == pytest.approx(1.0)
    assert frc.density_window(63) == 3 and frc.density_window(640) == 21 and frc.density_window(8192) == 33


def test_maxabs_guards_an_all_zero_signal():
    assert torch.equal(frc.maxabs(torch.zeros(5)), torch.zeros(5))
    assert frc.maxabs(torch.tensor([-4.0, 2.0])).tolist() == [-1.0, 0.5]


def test_budgets():
    assert frc.n_kept_tokens(100, 0.88) == 12 and frc.n_kept_tokens(5, 0.99) == 1
    assert frc.n_kept_chunks(441, 0.5) == (23, 11)
    assert frc.n_kept_chunks(30, 0.9) == (2, 1)
