"""The search's runtime guards, reached by programs that pass its static checks (stage 0): the hostile part
is built from strings, so only the sandbox can stop it. And the numpy program API a program imports inside
the sandbox gives the answers of the torch side."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sandbox_helpers import HOSTILE, cgroup_names, expected_boundary, filled, listener, processes_in

from cachecraft_lib.methods import frc
from cachecraft_lib.methods.features import FEATURES, FeatureContext
from cachecraft_lib.sandbox.runtime import policy_api
from cachecraft_lib.search.sandbox import CandidateFailed, Sandbox
from cachecraft_lib.search.seeds import __path__ as seeds_path
from cachecraft_lib.search.static_checks import stage0

CASES = json.loads((HOSTILE / "search_cases.json").read_text())
SECRET = "s3cr3t-search-0123456789"


def context(length: int = 120, ratio: float = 0.5, seed: int = 0) -> FeatureContext:
    rng = np.random.default_rng(seed)
    feats = {name: rng.random(length, dtype=np.float32) for name in FEATURES}
    for arr in feats.values():
        arr.flags.writeable = False
    return FeatureContext(feats, L=length, K=frc.n_kept_tokens(length, ratio), H=2, Q=8, layer=0,
                          compression_ratio=ratio)


def program(case: str, **fill: object) -> str:
    body = filled(CASES[case], **fill)
    return (HOSTILE / "search_base.py").read_text().replace("__HOSTILE__", body)


def failure(source: str) -> CandidateFailed:
    assert stage0(source) == [], "the hostile program must pass the static checks"
    with pytest.raises(CandidateFailed) as err, Sandbox(source, timeout_s=5.0, memory_mb=256) as box:
        trace = cgroup_names(box)
        box.select_layers([context()])
    assert not processes_in(trace)
    assert "LEAKED" not in str(err.value) and SECRET not in str(err.value)
    return err.value


def test_a_file_read_through_builtins_is_refused(tmp_path):
    (tmp_path / "secret").write_text(SECRET)
    assert failure(program("open", target=tmp_path / "secret")).kind == "file_access"


def test_a_socket_import_through_builtins_is_refused():
    assert failure(program("socket")).kind == "network"


def test_escaping_the_hook_reads_nothing(tmp_path):
    (tmp_path / "secret").write_text(SECRET)
    err = failure(program("escape_read", target=tmp_path / "secret"))
    assert err.kind == "crash" and "No such file" in str(err)


def test_escaping_the_hook_runs_no_program(tmp_path):
    marker = tmp_path / "marker"
    err = failure(program("escape_exec", target=marker))
    assert err.kind == "crash" and "not permitted" in str(err) and not marker.exists()


def test_escaping_the_hook_opens_no_socket():
    with listener() as (port, received):
        err = failure(program("escape_socket", port=port))
        assert received() == b""
    assert err.kind == "crash" and "not permitted" in str(err)


def test_escaping_the_hook_starts_no_process():
    err = failure(program("escape_fork"))
    assert err.kind == "crash" and "not permitted" in str(err)


def test_the_seeds_run_in_the_sandbox_as_in_process():
    from cachecraft_lib.methods.policy import load_policy, run_policy

    for path in sorted(__import__("pathlib").Path(seeds_path[0]).glob("*.py")):
        if path.name == "__init__.py":
            continue
        ctxs = [context(200, 0.75, seed) for seed in range(3)]
        with Sandbox(path.read_text(), timeout_s=10.0) as box:
            assert box.boundary == expected_boundary()
            inside = box.select_layers(ctxs)
        local = [run_policy(load_policy(path), c) for c in ctxs]
        assert all((a == b).all() for a, b in zip(inside, local, strict=True)), path.name


@pytest.mark.parametrize("length", [1, 7, 20, 41, 200, 1023])
@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 0.9])
def test_numpy_helpers_give_the_torch_answers(length, ratio):
    rng = np.random.default_rng(length)
    scores = rng.standard_normal(length).astype(np.float32)
    ctx = context(max(length, 1), ratio)
    np.testing.assert_array_equal(policy_api.topk_tokens(scores, ctx),
                                  frc.token_top_k(torch.from_numpy(scores), ratio).numpy())
    for lc in (1, 8, 20):
        np.testing.assert_array_equal(policy_api.topk_chunks(scores, ctx, lc),
                                      frc.chunk_top_k(torch.from_numpy(scores), ratio, lc).numpy())
    np.testing.assert_allclose(policy_api.chunk_means(scores, 20), frc.chunk_scores(torch.from_numpy(scores), 20),
                               rtol=1e-6)
    np.testing.assert_array_equal(policy_api.maxabs(scores), frc.maxabs(torch.from_numpy(scores)).numpy())


def test_numpy_helpers_keep_the_earlier_token_on_a_tie():
    ctx = context(10, 0.7)
    assert policy_api.topk_tokens(np.zeros(10, np.float32), ctx).tolist() == [0, 1, 2]
    assert policy_api.topk_chunks(np.ones(10, np.float32), ctx, 2).tolist() == [0, 1]


def test_the_feature_view_is_read_only_and_reads_like_a_context():
    view = policy_api.FeatureView({"global_attn": np.frombuffer(b"\0" * 16, np.float32)}, L=4, K=2, H=1, Q=1,
                                  layer=0, compression_ratio=0.5, chunk_length=20, window=32)
    assert view.global_attn is view["global_attn"] and view.scalars()["K"] == 2
    with pytest.raises(ValueError, match="read-only"):
        view.global_attn[0] = 1.0
    with pytest.raises(AttributeError, match="no feature"):
        _ = view.nothing
