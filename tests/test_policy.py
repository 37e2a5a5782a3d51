"""The invariant validator rejects each kind of bad selection, naming the invariant and the values."""

from __future__ import annotations

import numpy as np
import pytest

from cachecraft_lib.methods.policy import PolicyLoadError, SelectionError, load_policy, validate_selection

L, R = 100, 0.5  # K = 50 tokens; 5 chunks of 20 -> keep 2


def test_valid_tokenwise_and_chunked_are_accepted_and_sorted():
    tokenwise = np.random.default_rng(0).permutation(L)[:50]
    out = validate_selection(tokenwise, L, R)
    assert out.tolist() == sorted(tokenwise.tolist()) and out.dtype == np.int64
    chunked = np.r_[60:80, 0:20]
    assert validate_selection(chunked, L, R).tolist() == list(range(20)) + list(range(60, 80))


@pytest.mark.parametrize("indices,invariant,offending", [
    (np.arange(50, dtype=np.float32), "integer", None),
    (np.arange(50).reshape(5, 10), "shape", None),
    (np.r_[np.arange(49), 100], "range", [100]),
    (np.r_[np.arange(49), -1], "range", [-1]),
    (np.r_[np.arange(49), 3], "unique", [3]),
    (np.arange(L), "size", None),  # the reward hack: drop the [-k:] slice and keep everything
    (np.arange(49), "size", None),
    (np.r_[0:20, 20:40, 40:60], "size", [0, 1, 2]),  # three whole chunks where the rule keeps two
    (np.r_[0:20, 25:35], "size", None),  # a partial chunk
])
def test_each_violation_is_rejected_with_its_name(indices, invariant, offending):
    with pytest.raises(SelectionError) as info:
        validate_selection(indices, L, R)
    assert info.value.invariant == invariant
    assert f"'{invariant}'" in str(info.value)
    if offending is not None:
        assert list(np.asarray(info.value.offending).reshape(-1)) == offending


def test_chunk_rule_counts_the_short_last_chunk():
    # L = 110: 6 chunks (the last has 10 tokens); r = 0.5 keeps 3 whole chunks
    assert len(validate_selection(np.r_[0:20, 40:60, 100:110], 110, 0.5)) == 50
    with pytest.raises(SelectionError, match="size"):
        validate_selection(np.r_[0:20, 40:60, 100:105], 110, 0.5)


def test_load_policy_errors_are_clear(tmp_path):
    with pytest.raises(PolicyLoadError, match="syntax error at line 2"):
        load_policy("def score_tokens(ctx):\n    return (\n")
    with pytest.raises(PolicyLoadError, match="does not define select_tokens_to_keep"):
        load_policy("def score_tokens(ctx):\n    return 0\n")
    with pytest.raises(PolicyLoadError, match="raised while loading: ZeroDivisionError"):
        load_policy("x = 1 / 0\n")
    with pytest.raises(PolicyLoadError, match="does not exist"):
        load_policy(str(tmp_path / "missing.py"))
