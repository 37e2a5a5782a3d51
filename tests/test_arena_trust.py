"""The arena against a motivated competitor, without the OS sandbox: nothing of the test split leaves the harness,
names and files are an entry's own, the code that runs is the code hashed, authors and refusals are counted,
the secret is checked before anything runs (the ledger's signatures: test_arena_ledger_signed.py)."""

from __future__ import annotations

import hashlib
import itertools
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring.ledger import Ledger, RateLimited
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.arena.submissions.identity import author_key

ASSETS = Path(__file__).parent / "assets" / "arena"
# fixed public test secrets, 64 hex characters of a sha256 digest (notebook 07's kind): about 240 bits estimated
SECRET = hashlib.sha256(b"cachecraft tests: arena trust secret").hexdigest().encode()
OTHER = hashlib.sha256(b"cachecraft tests: another secret").hexdigest().encode()
MARKER = "LEAK-MARKER-5e1d9c"
_FOLDERS = itertools.count()


def _arena(root: Path, tiny_model) -> Arena:
    """Smoke board A, two contexts per split (one per task), one budget, SnapKV and the full cache."""
    arena = Arena("smoke", root, progress=False)
    board = arena.boards["A"]
    arena.boards["A"] = replace(board, budgets=(0.5,), items={"dev": 1, "test": 1}, baselines=("snapkv", "no_press"),
                                tasks=("niah_single_1", "vt"))
    arena._loaded, arena._loaded_name = tiny_model, arena.settings.models[0]
    return arena


def _submission(tmp_path: Path, name: str, author: str = "tester", src: Path = ASSETS / "good_scores",
                code: str | None = None) -> Path:
    folder = tmp_path / f"sub-{next(_FOLDERS)}"
    shutil.copytree(src, folder)
    (folder / "metadata.yaml").write_text(f"name: {name}\nauthor: \"{author}\"\nboards: [A]\n", encoding="utf-8")
    if code is not None:
        (folder / "method.py").write_text(code)
    return folder


def _assert_boundary_recorded(recorded: dict, weak_allowed: bool) -> None:
    """The entry names the boundary this machine gives, exactly, and says whether it is weak: a "weak: ..."
    boundary never passes as a whole one."""
    from cachecraft_lib.sandbox import boundary

    expected = boundary.plan(True).name
    whole = getattr(boundary, "WHOLE", (boundary.FULL,))
    assert recorded["sandbox"] == expected
    assert recorded["sandbox_weak"] is (expected not in whole) and recorded["weak_sandbox_allowed"] is weak_allowed
    if recorded["sandbox"].startswith("weak"):
        assert recorded["sandbox_weak"] is True


def _files(root: Path, skip: tuple[str, ...] = ("ledger.jsonl", "ledger.jsonl.head", "ledger.jsonl.lock")) \
        -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_model) -> Path:
    """An arena folder with round 1 and the baselines recorded on its test items (copied per test)."""
    root = tmp_path_factory.mktemp("arena") / "arena"
    _arena(root, tiny_model).record_baselines("A", SECRET)
    return root


@pytest.fixture()
def arena(recorded, tmp_path, tiny_model) -> Arena:
    root = tmp_path / "arena"
    shutil.copytree(recorded, root)
    return _arena(root, tiny_model)


# ------------------------------------------------------------------------------- the test split stays inside
@pytest.mark.slow
def test_a_refusal_on_test_items_puts_no_byte_of_the_methods_text_in_the_ledger(arena, tmp_path):
    from cachecraft_lib.arena.board_runner import submission_contender

    with pytest.raises(SubmissionError, match=MARKER):  # on the dev items the method's text is its own to see
        arena.dev("A", submission_contender(load_submission(ASSETS / "leaks_in_error")))
    out = arena.submit(ASSETS / "leaks_in_error", "A", SECRET)
    assert out["rejected"] and out["kind"] == "crash" and out["on_test"]
    public = "".join(p.read_text() for p in arena.root.glob("ledger*"))
    assert MARKER not in public and "LEAK" not in public
    assert arena.ledger.events()[-1]["payload"]["message"].startswith("refused on the hidden test items (crash)")
    private = (arena.root / "private" / "organiser.log").read_text()
    assert MARKER in private  # the organiser keeps it


@pytest.mark.slow
def test_a_method_keeps_no_state_from_one_context_to_the_next(arena, tmp_path):
    """A counter in ``self`` restarts with every context: one context's calls are its layers (x budgets)."""
    from cachecraft_lib.arena.board_runner import submission_contender

    per_context = arena._loaded[0].config.num_hidden_layers * len(arena.boards["A"].budgets)
    code = ("import numpy as np\n\n\nclass Method:\n    def __init__(self):\n        self.calls = 0\n\n"
            "    def score(self, layer):\n        self.calls += 1\n"
            f"        if self.calls > {per_context}:\n            raise RuntimeError('saw another context')\n"
            "        return np.linalg.norm(layer.keys, axis=-1)\n")
    sub = load_submission(_submission(tmp_path, "counter", code=code))
    report = arena.dev("A", submission_contender(sub))  # two contexts: would raise on the second without a reset
    assert "counter" in report["scores"].index


# --------------------------------------------------------------------------------------------- identities
@pytest.mark.slow
@pytest.mark.parametrize("name", ["snapkv", "snap-kv", "streaming-llm", "full", "no-press", "SnapKV", "snap\u200bkv"])
def test_a_baseline_named_submission_is_refused_and_changes_no_file(arena, tmp_path, name):
    before, ledger = _files(arena.root), (arena.root / "ledger.jsonl").read_text()
    out = arena.submit(_submission(tmp_path, name), "A", SECRET)
    assert out["rejected"] and out["kind"] in ("reserved_name", "bad_metadata")
    assert _files(arena.root) == before  # the baseline's private results and everything else untouched
    events = arena.ledger.events()
    assert (arena.root / "ledger.jsonl").read_text().startswith(ledger) and events[-1]["kind"] == "rejection"
    assert [e["kind"] for e in events].count("rejection") == 1


@pytest.mark.slow
def test_a_weak_boundary_allowed_through_the_environment_is_recorded_as_weak(arena, tmp_path, monkeypatch):
    """CACHECRAFT_ALLOW_WEAK_SANDBOX=1 (no flag in code) on a machine missing the boundary's parts: the entry
    says weak, names the weak boundary and records that weakness was allowed."""
    from cachecraft_lib.sandbox import boundary

    missing = {"bwrap": "not here (test)", "seccomp": "not here (test)", "cgroup": "not here (test)"}
    monkeypatch.setattr(boundary, "missing_parts", lambda *a, **k: dict(missing))
    monkeypatch.setenv(boundary.WEAK_ENV, "1")
    out = arena.submit(_submission(tmp_path, "weakly"), "A", SECRET)
    assert not out.get("rejected"), out
    recorded = [e["payload"] for e in arena.ledger.events() if e["kind"] == "submission"][-1]
    _assert_boundary_recorded(recorded, weak_allowed=True)
    assert recorded["sandbox_weak"] is True and recorded["sandbox"].startswith("weak")


@pytest.mark.slow
def test_every_evaluation_on_test_items_is_a_ledger_event(arena, tmp_path):
    """A ``test_look`` (author, program hash, board, round) before each run on test items, scored or crashed;
    none for a refusal before anything ran, nor for a reveal; the leaderboard counts them per author."""
    from cachecraft_lib.arena.scoring import leaderboard

    def looks() -> list[dict]:
        return [e["payload"] for e in arena.ledger.events() if e["kind"] == "test_look"]

    assert [(x["author"], x["program"]) for x in looks()] == [("baseline", "baseline:snapkv")]
    from cachecraft_lib.arena.scoring.behaviour import FAILED, UNSTABLE, sketch_key
    from cachecraft_lib.arena.scoring.code_shape import look_digests

    folder = _submission(tmp_path, "looked", "Looker")
    entry = arena.submit(folder, "A", SECRET)
    after = looks()
    # the digests a renamed copy, a copy doing the same, or nearly, on the round's test contexts, are caught by
    assert {"program_ast", "program_shape", "program_behaviour", "program_sketch"} <= set(after[-1])
    behaviour = arena.behaviour(arena.board("A"), load_submission(folder), SECRET, 1)  # keyed by the round
    assert behaviour["program_behaviour"] not in (FAILED, UNSTABLE) and len(behaviour["program_sketch"]) == 4096
    assert entry["code_behaviour"] == behaviour["program_behaviour"] and entry["code_sketch"] == behaviour[
        "program_sketch"]
    assert len(after) == 2 and after[-1] == {"board": "A", "round": 1, "author": "Looker", "author_key": "looker",
                                             "name": "looked", "program": entry["code_sha256"],
                                             **look_digests((folder / "method.py").read_bytes()), **behaviour}
    probed = arena._probes[(repr(arena.board("A")), arena._loaded_name, sketch_key(SECRET, "A", 1))]
    test_texts = set(arena.items(arena.board("A"), "test", SECRET, 1).context)  # the round's, not public dev's
    assert set(probed.items.context) <= test_texts and not test_texts & set(arena.items(arena.board("A"),
                                                                                        "dev").context)
    arena.submit(_submission(tmp_path, "crashes", "looker", src=ASSETS / "crash"), "A", SECRET)
    assert len(looks()) == 3  # a crash on the test items was a look too
    assert looks()[-1]["program_behaviour"] == FAILED and "program_sketch" not in looks()[-1]  # failing programs' one
    arena.submit(_submission(tmp_path, "snapkv", "looker"), "A", SECRET)  # refused before anything ran
    arena.reveal(SECRET)
    assert len(looks()) == 3
    table = leaderboard.leaderboard(arena.ledger.events(), "A").set_index("name")
    assert table.loc["looked", "test_looks"] == 2 and table.loc["snapkv", "test_looks"] == 1


@pytest.mark.slow
def test_a_run_that_scores_after_a_failed_or_unstable_probe_is_refused(arena, tmp_path, monkeypatch):
    """Sixth red team (f5): a program raising only in the probe (before an instant) took the shared ``FAILED``
    marker, then scored as another program; now the run is refused as a behaviour mismatch, its look counted."""
    from cachecraft_lib.arena.scoring.behaviour import FAILED, UNSTABLE

    for n, marker in enumerate((FAILED, UNSTABLE)):
        monkeypatch.setattr(Arena, "behaviour", lambda *a, marker=marker, **k: {"program_behaviour": marker})
        got = arena.submit(_submission(tmp_path, f"flaky{n}", "mallory"), "A", SECRET)
        assert got["rejected"] and got["kind"] == "behaviour_mismatch" and got["on_test"]
        looks = [e["payload"] for e in arena.ledger.events() if e["kind"] == "test_look"]
        assert looks[-1]["name"] == f"flaky{n}" and looks[-1]["program_behaviour"] == marker
    assert not [e for e in arena.ledger.events() if e["kind"] == "submission"]
    log = (arena.root / "private" / "organiser.log").read_text()
    assert "probe contexts but its test run scored" in log


@pytest.mark.parametrize("name", ["snapkv", "snap-kv", "snap_kv", "streaming-llm", "no-press", "full", "pyramid-kv",
                                  "h2o", "expected-attention"])
def test_reserved_names_in_any_spelling(tmp_path, name):
    with pytest.raises(SubmissionError) as err:
        load_submission(_submission(tmp_path, name))
    assert err.value.kind == "reserved_name"
    load_submission(_submission(tmp_path, "snapkv-plus"))  # a name that only contains one is fine


@pytest.mark.slow
def test_results_live_under_the_entrys_ledger_id_and_never_overwrite(arena, tmp_path):
    first = arena.submit(_submission(tmp_path, "norms"), "A", SECRET)
    again = arena.submit(_submission(tmp_path, "norms"), "A", SECRET)  # the same author resubmits: a new entry
    assert first["entry_id"] != again["entry_id"]
    recorded = [e["payload"] for e in arena.ledger.events() if e["kind"] == "submission"][-1]
    _assert_boundary_recorded(recorded, weak_allowed=False)
    files = {p.name for p in (arena.root / "private" / "round1" / "A").iterdir()}
    assert {f"{first['entry_id']}.parquet", f"{again['entry_id']}.parquet", "baseline-snapkv.parquet"} <= files
    other = arena.submit(_submission(tmp_path, "norms", author="someone-else"), "A", SECRET)
    assert other["rejected"] and other["kind"] == "reserved_name"  # another author's entry name


def test_the_bytes_that_run_are_the_bytes_that_were_hashed(tmp_path):
    from cachecraft_lib.arena.submissions.sandbox import MethodSandbox

    folder = _submission(tmp_path, "norms")
    original = (folder / "method.py").read_bytes()
    sub = load_submission(folder)
    (folder / "method.py").write_text("class Method:\n    def score(self, layer):\n        raise RuntimeError('swap')\n")
    assert sub.source.encode() == original and hashlib.sha256(sub.source.encode()).hexdigest() == sub.code_sha256
    keys = np.random.default_rng(0).standard_normal((2, 16, 8)).astype(np.float32)
    arrays = {"keys": keys, "values": keys, "queries": keys[:, -4:], "positions": np.arange(16)}
    with MethodSandbox(sub) as box:  # runs the hashed code, not the swapped file
        answer = box.answer(arrays, budget=8, layer=0, n_layers=1, compression_ratio=0.5)
    assert np.allclose(answer, np.linalg.norm(keys, axis=-1))


# ------------------------------------------------------------------------------------ authors and the limit
def test_author_variants_are_one_author(tmp_path):
    variants = ["Agent1", " agent1 ", "agent\u200b1", "\uff21\uff27\uff25\uff2e\uff34\uff11", "AGENT1\ufeff"]
    assert {author_key(v) for v in variants} == {"agent1"}
    assert {author_key(v) for v in ("\u0430gent1", "AG\u0415NT1", "\u0391GENT1")} == {"agent1"}  # look-alikes
    assert author_key("agent2") != "agent1"
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for v in variants[:4]:
        ledger.append("rejection", {"author": v, "kind": "crash"})
    with pytest.raises(RateLimited):
        ledger.check_rate("agent1", limit=4)
    ledger.check_rate("agent2", limit=4)


@pytest.mark.slow
def test_crashes_and_failed_checks_count_toward_the_limit_with_their_author(arena, tmp_path):
    crash = arena.submit(_submission(tmp_path, "crashes", "Agent7", src=ASSETS / "crash"), "A", SECRET)
    broken = arena.submit(_submission(tmp_path, "no-desc", "agent7 ", src=ASSETS / "missing_description"), "A",
                          SECRET)
    assert crash["rejected"] and crash["kind"] == "crash"
    assert broken["rejected"] and broken["kind"] == "missing_file" and broken["author_key"] == "agent7"
    with pytest.raises(RateLimited):
        arena.ledger.check_rate("AGENT7", limit=2)
    for _ in range(3):
        arena.submit(_submission(tmp_path, "crashes", "agent\u200b7", src=ASSETS / "crash"), "A", SECRET)
    with pytest.raises(RateLimited):  # five refusals: the sixth is not run at all
        arena.submit(_submission(tmp_path, "fine", "agent7"), "A", SECRET)


# ------------------------------------------------------------------------------------------------ secrets
def test_a_weak_secret_is_refused_before_anything_runs(tmp_path):
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    for weak in (b"a" * 64, b"short", b"password" * 4):
        with pytest.raises(splits.SecretMissing):
            arena.submit(ASSETS / "good_scores", "A", weak)
    assert arena._loaded is None and not (tmp_path / "arena").exists()  # no model, no ledger, no file


def test_a_secret_not_matching_the_commitment_is_refused_before_anything_runs(tmp_path):
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    arena.ensure_round(SECRET, 1)
    round_ = arena.ledger.events()[0]["payload"]
    assert len(round_["salt"]) == 32 and round_["commitment"] == splits.commitment(SECRET, 1, round_["salt"])
    before = _files(arena.root, skip=())
    with pytest.raises(splits.SecretMismatch):
        arena.submit(ASSETS / "good_scores", "A", OTHER)
    with pytest.raises(splits.SecretMismatch):
        arena.record_baselines("A", OTHER)
    assert arena._loaded is None and _files(arena.root, skip=()) == before
    assert not arena.reveal(OTHER)["matches"] and arena.reveal(OTHER)["test_seeds"] == {}
    assert arena.reveal(SECRET)["matches"] and arena.reveal(SECRET)["test_seeds"]["A"] == splits.test_seed(SECRET, "A", 1)
