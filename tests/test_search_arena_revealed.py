"""Board B_offline's notebook 08 round, revealed (issue 56's five-seed design, run 2026-12-07): its secret is committed
after the round closed, so anyone can check it against the commitment in the round's signed ledger, regenerate the hidden
test items and re-score the committed programs on them (``scripts/rescore_revealed_round.py``). The baselines'
and the controls' per-unit test values are in the same file as the entries', so the comparison with the board's best baseline, not
only with FRC, can be recomputed. No model here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring.claims import claim_verdict
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.search.seed_pool import pool_seeds

SAMPLES = Path(__file__).resolve().parents[1] / "figures" / "samples"
STEM = "08_search_arena_B_offline"


def _events(tmp_path: Path) -> list[dict]:
    (tmp_path / "ledger.jsonl").write_bytes((SAMPLES / f"{STEM}_ledger.jsonl").read_bytes())
    (tmp_path / "ledger.pub").write_bytes((SAMPLES / f"{STEM}_ledger.pub").read_bytes())
    return Ledger(tmp_path / "ledger.jsonl").events()


def _round(events: list[dict]) -> dict:
    return next(e["payload"] for e in events if e["kind"] == "round")


def _units_of() -> dict[str, pd.DataFrame]:
    """Every method's per-unit test values in the committed file (entries, FRC, the baselines and the controls)."""
    units = pd.read_csv(SAMPLES / f"{STEM}.csv.gz")
    return {m: rows[["context_id", "task", "overall"]] for m, rows in units.groupby("method")}


@pytest.fixture
def events(tmp_path):
    if not (SAMPLES / f"{STEM}_revealed_secret.txt").exists():
        pytest.skip("board B_offline's round is not committed")
    return _events(tmp_path)


def test_the_revealed_secret_is_the_rounds_committed_one(events):
    secret = (SAMPLES / f"{STEM}_revealed_secret.txt").read_text().strip().encode()
    found = _round(events)
    assert splits.verify_reveal(secret, 1, found["commitment"], found["salt"])
    assert not splits.verify_reveal(secret[:-1] + b"0" if secret[-1:] != b"0" else secret[:-1] + b"1", 1,
                                    found["commitment"], found["salt"])  # one character off: not the round's
    assert not splits.verify_reveal(secret, 2, found["commitment"], found["salt"])  # another round's


def test_the_committed_ledger_is_signed_and_its_five_claims_hold_with_one_look_each(events):
    """The B_offline run's public ledger verifies against its
    published key (the ``events`` fixture: ``LedgerTampered`` on an edited or unsigned line), its plan comes before
    the round's commitment, and each seed's claim holds on one look."""
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "plan" and kinds.index("round") > 0 and events[0]["payload"]["board"] == "B_offline"
    entries = [e for e in events if e["kind"] == "submission" and (e["payload"].get("origin") or {}).get("plan")]
    assert sorted(e["payload"]["origin"]["random_seed"] for e in entries) == [0, 1, 2, 3, 4]
    for entry in entries:
        verdict = claim_verdict(events, entry)
        assert verdict.holds and verdict.looks == 1 and "old ledger" not in verdict.reason, verdict.reason


def test_the_committed_baselines_are_the_ledgers_and_cover_the_entries_units(events):
    entries = pd.read_csv(SAMPLES / f"{STEM}.csv.gz")
    recorded = {e["payload"]["name"]: e["payload"]["overall"] for e in events if e["kind"] == "baseline"}
    baselines = entries[entries.method.isin(set(recorded))]
    assert set(baselines.method) == set(recorded) and "streaming_llm" in recorded
    for name, rows in baselines.groupby("method"):
        assert rows.overall.mean() == pytest.approx(recorded[name], abs=1e-6)
        assert sorted(rows.context_id) == sorted(entries[entries.method == "frc"].context_id)


def test_against_the_selection_halfs_best_baseline_no_seed_beats_it():
    """The plan's comparator (named before the run): StreamingLLM, the best baseline on the selection half of the
    dev items (the table's dev rows), on the same test units. Issue 56's criterion (every seed beats it) is not met:
    no seed passes the gate, and a run's interval holds 0."""
    table = pd.read_csv(Path(__file__).resolve().parents[1] / "figures" / "table_search_arena_gains_B_offline.csv")
    against = set(table[table.split.str.startswith("dev")].against)
    assert against == {"streaming_llm"}
    of = _units_of()
    names = {s: f"search-v1-{s}" for s in range(5)}
    pool = pool_seeds({s: of[n] for s, n in names.items()}, names, of["streaming_llm"], "streaming_llm", 0.005)
    assert pool.beats == 0 and pool.run.lo < 0 < pool.run.hi
    rows = table[table.split.str.startswith("test") & (table.against == "streaming_llm")]
    found = pd.DataFrame(pool.rows("test"))[["gain", "lo", "hi"]].round(4).to_numpy()
    assert rows[["gain", "lo", "hi"]].to_numpy() == pytest.approx(found, abs=1e-4)  # the table's rows, a run's too


def test_a_pools_rows_and_verdicts_read_as_the_table_says():
    """``SeedPool.rows`` (notebook 08's table): a row per seed then ``pooled``, each naming its reference; ``verdict``
    from the interval alone, and none without one."""
    from cachecraft_lib.search.seed_pool import verdict

    of = _units_of()
    names = {s: f"search-v1-{s}" for s in range(5)}
    pool = pool_seeds({s: of[n] for s, n in names.items()}, names, of["frc"], "frc", 0.005)
    rows = pd.DataFrame(pool.rows("test"))
    assert list(rows.random_seed) == ["0", "1", "2", "3", "4", "pooled", "a run"] and set(rows.against) == {"frc"}
    assert rows.iloc[-2].gain == pool.pooled_gain and rows.iloc[0].lo == pool.per_seed.lo[0]
    assert (rows.iloc[-1].lo, rows.iloc[-1].hi, rows.iloc[-1].seeds) == (pool.run.lo, pool.run.hi, 5)
    assert [verdict(0.01, 0.2, 0.005), verdict(-0.3, -0.1, 0.005), verdict(-0.1, 0.1, 0.005),
            verdict(float("nan"), float("nan"), 0.005)] == ["passes the gate", "below", "inconclusive",
                                                              "no interval (one context per task)"]
    assert verdict(0.005, 0.2, 0.005) == "inconclusive"  # the gate is strict: at the threshold is not past it


def _script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "rescore_revealed_round.py"
    spec = importlib.util.spec_from_file_location("rescore_revealed_round", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rescore_script_checks_the_secret_and_scores_the_ledgers_programs(events, tmp_path, monkeypatch):
    """``scripts/rescore_revealed_round.py`` without its model run: it refuses a secret that is not the round's,
    and the programs it would score are the ledger's (their converted method.py's SHA-256 is each entry's)."""
    import hashlib

    rescore = _script()
    assert rescore.revealed_secret(STEM, events) == (SAMPLES / f"{STEM}_revealed_secret.txt").read_text().encode().strip()
    wrong = tmp_path / "samples"
    wrong.mkdir()
    (wrong / f"{STEM}_revealed_secret.txt").write_text("f" * 64)
    monkeypatch.setattr(rescore, "SAMPLES", wrong)
    with pytest.raises(ValueError, match="does not match"):
        rescore.revealed_secret(STEM, events)
    monkeypatch.setattr(rescore, "SAMPLES", SAMPLES)
    (tmp_path / "c").mkdir()
    found = rescore.contenders(STEM, events, "B_offline", tmp_path / "c")
    seeds = [f"search-v1-{s}" for s in range(5)]
    baselines = ["streaming_llm", "knorm", "expected_attention", "snapkv", "kvzip", "random"]
    assert [c.name for c in found] == ["no_press", "frc", *baselines, *seeds]
    recorded = {e["payload"]["name"]: e["payload"]["code_sha256"] for e in events if e["kind"] == "submission"}
    for name in seeds:
        code = (tmp_path / "c" / name / "method.py").read_bytes()
        assert hashlib.sha256(code).hexdigest() == recorded[name]


def test_the_rescore_compares_only_what_it_scored_and_a_missing_unit_shows():
    """The controls' programs are not committed, so the re-score leaves them out (and names them); a unit of a
    re-scored method that the re-score lacks is a missing value, which fails the run (exit 1), never a pass."""
    rescore = _script()
    committed = pd.DataFrame({"method": ["frc", "frc", "seed-v1"], "context_id": ["a", "b", "a"],
                              "task": "vt", "overall": [0.5, 0.25, 0.75]})
    merged = rescore.compare(committed[committed.method == "frc"].iloc[:1], committed)
    assert set(merged.method) == {"frc"} and len(merged) == 2 and merged["diff"].isna().sum() == 1
    merged = rescore.compare(committed[committed.method == "frc"], committed)
    assert merged["diff"].max() == 0 and merged["diff"].notna().all()
