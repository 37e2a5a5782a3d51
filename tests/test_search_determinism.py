"""What makes a search repeat exactly: a fixed hash seed set by the code, seeded ids, proposals that depend only
on the seed and iteration, and candidate time limits that count CPU, not the (loaded) machine's wall clock."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.methods.features import FEATURES, FeatureContext
from cachecraft_lib.methods.frc import n_kept_tokens
from cachecraft_lib.profiles import get_profile
from cachecraft_lib.search import mutator, runlog
from cachecraft_lib.search.determinism import deterministic_env, hash_seed_fixed
from cachecraft_lib.search.evolve import search_seeds, seed_folder
from cachecraft_lib.search.isolate import profile_from_dict
from cachecraft_lib.search.sandbox import CandidateFailed, Sandbox
from cachecraft_lib.search.seeds import SEEDS

SEED = SEEDS["v5"].read_text()


def _context(length: int = 200, ratio: float = 0.5) -> FeatureContext:
    rng = np.random.default_rng(0)
    feats = {}
    for name in FEATURES:
        arr = rng.random(length, dtype=np.float32)
        arr.flags.writeable = False
        feats[name] = arr
    return FeatureContext(feats, L=length, K=n_kept_tokens(length, ratio), H=2, Q=8, layer=0,
                          compression_ratio=ratio)


def _hacked(name: str) -> str:
    diff = mutator.hack(SEED, name)
    search, replace = diff.split("<<<<<<< SEARCH\n")[1].split("\n>>>>>>> REPLACE")[0].split("\n=======\n")
    return SEED.replace(search, replace)


def _flag(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", "import sys; print(sys.flags.hash_randomization)"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_deterministic_env_fixes_the_hash_seed_of_a_child():
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    assert _flag(bare) == "1" and _flag(deterministic_env(bare)) == "0"
    assert hash_seed_fixed() == (sys.flags.hash_randomization == 0)


@pytest.mark.slow
def test_runner_starts_kernels_with_the_fixed_hash_seed(tmp_path, monkeypatch):
    import nbformat

    from cachecraft_lib.report.notebooks import run_notebook

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('PROFILE = "smoke"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import sys\nfrom cachecraft_lib.report.notebooks import record\n"
                                  "record(flag=sys.flags.hash_randomization)")],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                  "language_info": {"name": "python"}})
    path = tmp_path / "99_hash.ipynb"
    nbformat.write(nb, str(path))
    assert run_notebook(path, "smoke", out_dir=tmp_path / "out", figures=tmp_path / "f").records == {"flag": 0}
    assert "PYTHONHASHSEED" not in os.environ  # restored after the run


def test_seeded_ids_in_a_spawned_worker():
    code = ("import os, uuid; os.environ['CACHECRAFT_IDS_SEED'] = '7'\n"
            "from cachecraft_lib.search.determinism import worker_ids; worker_ids(); a = uuid.uuid4(); worker_ids()\n"
            "print(a, uuid.uuid4())")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert outs[0] == outs[1] and len(set(outs[0].split())) == 2  # repeatable, and a second call keeps the counter


def test_a_proposal_depends_only_on_the_iteration_seed_and_the_program():
    prompt = f"# Current Program\n```python\n{SEED}\n```\n"
    message = [{"role": "user", "content": prompt}]
    fresh = mutator.OfflineMutator(adversarial=0.5)
    used = mutator.OfflineMutator(adversarial=0.5)
    for seed in range(5):  # the used mutator has served other iterations (hangs included) before
        asyncio.run(used.generate_with_context("", [{"role": "user", "content": f"# Current Program\n```python\n"
                                                     f"{_hacked('hang')}\n```\n"}], seed=seed))
    for seed in (11, 12, 13):
        assert asyncio.run(fresh.generate_with_context("", message, seed=seed)) == \
            asyncio.run(used.generate_with_context("", message, seed=seed))
    assert asyncio.run(fresh.generate_with_context("", message)) == asyncio.run(used.generate_with_context("", message))


def test_a_hang_is_killed_by_its_cpu_time():
    start = time.time()
    with pytest.raises(CandidateFailed, match="CPU time") as err, Sandbox(_hacked("hang"), timeout_s=1.0) as box:
        box.select_layers([_context()])
    assert err.value.kind == "timeout" and time.time() - start < 60


def test_a_stalled_machine_does_not_time_out_a_valid_candidate(monkeypatch):
    """The child gets no CPU for three times its limit after a request (as a loaded machine would starve it: the
    box's own resume is delayed 3 s); it uses no CPU meanwhile, so it answers when resumed; a wall-clock limit
    would have made this valid candidate invalid."""
    from cachecraft_lib.sandbox.box import Box

    resume = Box._resume
    monkeypatch.setattr(Box, "_resume", lambda self: threading.Timer(3.0, resume, (self,)).start())
    with Sandbox(SEED, timeout_s=1.0) as box:
        start = time.time()
        kept = box.select_layers([_context()])
        assert time.time() - start >= 2.5
    assert len(kept[0]) == n_kept_tokens(200, 0.5)


def test_profile_survives_the_fresh_process_spec():
    profile = get_profile("smoke")
    import json

    assert profile_from_dict(json.loads(json.dumps(profile.to_dict()))) == profile


def test_seeds_and_their_folders(tmp_path):
    assert search_seeds(get_profile("smoke")) == [42]
    assert search_seeds(get_profile("smoke"), 3) == [42, 43, 44]
    assert seed_folder(tmp_path / "run", 42, 42) == tmp_path / "run"
    assert seed_folder(tmp_path / "run", 43, 42) == tmp_path / "run_rs43"


def test_seed_spread_and_canonical_log(tmp_path):
    def run(fitness: list[float], s1: list[float], share: list[float]) -> runlog.Run:
        trace = pd.DataFrame({"fitness": fitness, "s1": s1, "frc_share": share, "valid": True,
                              "generation": [1, 1, 2, 2]})
        return runlog.Run(tmp_path, {}, trace, pd.DataFrame(), "")

    runs = {42: run([1, 2, 3, 4], [1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]),
            43: run([1, 5, 2, 2], [4, 3, 2, 1], [0.1, 0.2, 0.3, 0.4])}
    spread = runlog.seed_spread(runs)
    assert list(spread.index[:2]) == ["random_seed 42", "random_seed 43"]
    assert spread.loc["median over 2 seeds", "best_fitness"] == 4.5
    assert spread.loc["min over 2 seeds", "spearman"] == pytest.approx(-1.0)
    assert len(runlog.seed_spread({42: runs[42]})) == 1  # one seed: no spread rows
    (tmp_path / "evolution_trace.jsonl").write_text(
        '{"iteration": 1, "timestamp": 5.0, "metadata": {"iteration_time": 2.0, "changes": "x"}}\n')
    assert runlog.canonical_log(tmp_path) == [{"iteration": 1, "metadata": {"changes": "x"}}]
