"""Arena rules: secret-derived test seeds and their commitment, the gate, the hash-chained ledger, points."""

from __future__ import annotations

import hashlib
import json
import string
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring import points
from cachecraft_lib.arena.scoring.gate import gate
from cachecraft_lib.arena.scoring.ledger import Ledger, LedgerTampered, RateLimited

SECRET, OTHER = b"a" * 32, b"b" * 32
STRONG = hashlib.sha256(b"cachecraft tests: core rules secret").hexdigest()  # 64 hex (notebook 07's kind)
DEMO = "909b628237c7edbf7e55da110f8e540a7098dee6e03c29b7e1e3931efc380fc1"  # notebook 07's public demo secret


# ------------------------------------------------------------------------------------------ splits
def test_test_seed_needs_the_secret_and_differs_per_secret(monkeypatch, tmp_path):
    monkeypatch.delenv(splits.SECRET_ENV, raising=False)
    monkeypatch.setenv(splits.SECRET_FILE_ENV, str(tmp_path / "absent"))
    with pytest.raises(splits.SecretMissing, match="token_hex"):
        splits.load_secret()
    with pytest.raises(splits.SecretMissing):
        splits.test_seed(b"", "A", 1)
    seeds = {splits.test_seed(s, b, r) for s in (SECRET, OTHER) for b in ("A", "B_online") for r in (1, 2)}
    assert len(seeds) == 8  # per secret, board and round
    assert splits.test_seed(SECRET, "A", 1) == splits.test_seed(SECRET, "A", 1)
    assert splits.test_seed(SECRET, "A", 1) != splits.dev_seed("A")


def test_secret_from_env_or_a_file_outside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv(splits.SECRET_ENV, STRONG)
    assert splits.load_secret() == STRONG.encode()
    monkeypatch.setenv(splits.SECRET_ENV, "short")
    with pytest.raises(splits.SecretMissing, match="shorter"):
        splits.load_secret()
    monkeypatch.delenv(splits.SECRET_ENV)
    outside = tmp_path / "secret"
    outside.write_text(splits.new_secret())
    monkeypatch.setenv(splits.SECRET_FILE_ENV, str(outside))
    assert len(splits.load_secret(repo_root=tmp_path / "repo")) == 64
    with pytest.raises(splits.SecretMissing, match="inside the checkout"):
        splits.load_secret(repo_root=tmp_path)


def test_test_seeds_avoid_every_other_seed():
    reserved = splits.reserved_seeds()
    assert {987_654, 424_242, 1234, 42} <= reserved
    seeds = [splits.test_seed(bytes([i]) * 32, "A", 1) for i in range(200)]
    assert not any(splits.is_reserved(s, ("A",)) for s in seeds)
    assert splits.is_reserved(1234 * 1_000_003 + 5)  # a training stream seed
    assert splits.is_reserved(splits.dev_seed("B_online"))


def test_commitment_verifies_only_the_right_secret_round_and_salt():
    salt = splits.new_salt()
    recorded = splits.commitment(SECRET, 1, salt)
    assert SECRET.decode() not in recorded and len(salt) == 32
    assert splits.verify_reveal(SECRET, 1, recorded, salt)
    assert not splits.verify_reveal(OTHER, 1, recorded, salt)
    assert not splits.verify_reveal(SECRET, 2, recorded, salt)
    assert not splits.verify_reveal(SECRET, 1, recorded, splits.new_salt())  # the salt is part of it
    assert splits.commitment(SECRET, 1, splits.new_salt()) != recorded  # a guess list hashed in advance is useless
    with pytest.raises(ValueError, match="salt"):
        splits.commitment(SECRET, 1, "")


@pytest.mark.parametrize("weak", [b"a" * 64, b"password" * 4, b"0101" * 10, b"short-secret", b"password" * 8,
                                  b"0123456789abcdef" * 4, b"abcd" * 16, (string.ascii_letters + string.digits).encode(),
                                  string.ascii_lowercase.encode() * 2, b"fedcba9876543210" * 4])
def test_weak_secrets_are_refused(weak):
    with pytest.raises(splits.SecretMissing, match="guessable|shorter"):
        splits.check_secret(weak)


def test_generated_and_fixed_hex_secrets_pass():
    assert splits.check_secret(STRONG.encode()) == STRONG.encode()
    assert splits.check_secret(DEMO.encode()) == DEMO.encode()
    for _ in range(50):  # new_secret: 256 bits, always above the estimate's bar
        assert splits.entropy_bits(splits.new_secret().encode()) > splits.MIN_SECRET_BITS


# -------------------------------------------------------------------------------------------- gate
def _items(n_per_task: int = 30, seed: int = 0) -> tuple[pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    tasks = pd.Series(np.repeat(["niah", "vt", "qa"], n_per_task))
    return pd.Series(rng.random(len(tasks))), tasks


def test_a_resubmitted_baseline_earns_nothing():
    best, tasks = _items()
    result = gate(best.copy(), best, tasks, threshold=0.005, seed=7)
    assert (result.gain, result.lo, result.hi, result.passed) == (0.0, 0.0, 0.0, False)
    assert not gate(best.copy(), best, tasks, threshold=0.0, seed=7).passed  # lo == 0 is not above 0


def test_a_method_better_by_construction_passes_and_noise_does_not():
    best, tasks = _items()
    rng = np.random.default_rng(1)
    better = (best + 0.05 + rng.normal(0, 0.02, len(best))).clip(0, 1.2)
    result = gate(better, best, tasks, threshold=0.005, seed=3)
    assert result.passed and result.lo > 0.005 and result.seed == 3
    noise = best + rng.normal(0, 0.2, len(best))
    assert not gate(noise, best, tasks, threshold=0.005, seed=3).passed
    assert gate(better, best, tasks, 0.005, 3) == result  # seeded: repeats exactly


def test_gate_refuses_unpaired_items():
    best, tasks = _items()
    with pytest.raises(ValueError, match="same items"):
        gate(best.drop(index=[0]), best, tasks, 0.005, 1)


# ------------------------------------------------------------------------------------------ ledger
def _ledger(tmp_path, n: int = 4) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": splits.commitment(SECRET, 1, "s")})
    for i in range(n - 1):
        ledger.append("submission", {"name": f"m{i}", "author": "me", "overall": 0.5 + i / 100})
    return ledger


def _rewrite(ledger: Ledger, lines: list[str]) -> None:
    ledger.path.write_text("".join(line + "\n" for line in lines))


def test_ledger_chains_and_carries_the_rules_version(tmp_path):
    events = _ledger(tmp_path).events()
    assert [e["seq"] for e in events] == [0, 1, 2, 3]
    assert all(e["rules_version"] for e in events) and events[1]["prev"] == events[0]["hash"]


def test_ledger_detects_an_edited_line(tmp_path):
    ledger = _ledger(tmp_path)
    lines = ledger.path.read_text().splitlines()
    event = json.loads(lines[2])
    event["payload"]["overall"] = 0.99
    _rewrite(ledger, [lines[0], lines[1], json.dumps(event), lines[3]])
    with pytest.raises(LedgerTampered) as err:
        ledger.events()
    assert err.value.line == 3


def test_ledger_detects_a_deleted_and_a_reordered_line(tmp_path):
    ledger = _ledger(tmp_path)
    lines = ledger.path.read_text().splitlines()
    _rewrite(ledger, [lines[0], lines[2], lines[3]])
    with pytest.raises(LedgerTampered) as err:
        ledger.events()
    assert err.value.line == 2
    _rewrite(ledger, [lines[0], lines[2], lines[1], lines[3]])
    with pytest.raises(LedgerTampered) as err:
        ledger.events()
    assert err.value.line == 2
    _rewrite(ledger, lines[:3])  # cut off the end: the head knows there were four
    with pytest.raises(LedgerTampered, match="missing"):
        ledger.events()
    _rewrite(ledger, lines)
    assert len(ledger.events()) == 4
    with pytest.raises(ValueError, match="kind"):
        ledger.append("bogus", {})


def test_rate_limit_per_author_and_window(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    t0 = datetime(2026, 10, 18, 12, tzinfo=UTC)
    for i in range(3):
        ledger.append("submission" if i else "rejection", {"author": "agent1"}, now=t0 + timedelta(hours=i))
    ledger.check_rate("agent1", limit=4, now=t0 + timedelta(hours=3))
    with pytest.raises(RateLimited, match="2026-10-19T12:00"):
        ledger.check_rate("agent1", limit=3, now=t0 + timedelta(hours=3))
    ledger.check_rate("agent2", limit=3, now=t0 + timedelta(hours=3))
    ledger.check_rate("agent1", limit=3, now=t0 + timedelta(hours=24, minutes=1))  # the first left the window


# ------------------------------------------------------------------------------------------ points
def test_post_replay_reproduces_its_table():
    out = points.replay(points.post_entries(), "post")
    earned = out[out.points > 0].set_index(["name", "board"]).points
    assert set(earned.index) == {("agent1-001 probevr", "B_online"), ("agent1-001 probevr", "B_offline"),
                                 ("agent1-002 wherewhat_a", "A"), ("agent2-003 kvprior", "C")}  # "new best/bar"
    assert earned[("agent1-001 probevr", "B_online")] == pytest.approx(21.7)


def test_frozen_bar_keeps_real_improvements_worth_submitting():
    out = points.replay(points.post_entries(), "frozen_bar").set_index(["name", "board"])
    assert out.points[("agent2-002 spanvote", "A")] == pytest.approx(4.1)  # above the bar, not the best
    assert out.points[("agent1-004 foresight_c2", "C")] == pytest.approx(1.1)
    assert out.points[("agent1-003 foresight_c", "C")] == 0.0  # below the launch bar
    assert out.points[("agent2-004 kvprior_skim", "C")] == 0.0  # below its author's own best credit


def test_a_leader_improving_its_own_entry_is_locked_out_only_under_the_post_rule():
    entries = points.post_entries()
    follow_up = {"time": "later", "board": "B_online", "name": "agent1-005 probevr2", "author": "agent1",
                 "kind": "submission", "overall": 0.700}  # +0.053 over its own 0.647, less than its first +0.217
    entries = pd.concat([entries, pd.DataFrame([follow_up])], ignore_index=True)
    post = points.replay(entries, "post").set_index("name").points
    ours = points.replay(entries, "frozen_bar").set_index("name").points
    assert post["agent1-005 probevr2"] == 0.0
    assert ours["agent1-005 probevr2"] == pytest.approx(5.3 + 5.3)  # better credit over the bar + frontier bonus
    resubmit = {**follow_up, "name": "agent1-006 copy", "overall": 0.700}
    again = points.replay(pd.concat([entries, pd.DataFrame([resubmit])], ignore_index=True), "frozen_bar")
    assert again.set_index("name").points["agent1-006 copy"] == 0.0  # the same method again earns nothing


def test_award_reads_the_ledger_payloads():
    state = pd.DataFrame([
        {"name": "snapkv", "author": "baseline", "kind": "baseline", "overall": 0.60, "eligible": True, "moved": True},
        {"name": "mine", "author": "me", "kind": "submission", "overall": 0.65, "eligible": True, "moved": True,
         "best_before": "snapkv", "gain": 0.05, "gain_lo": 0.02}])
    entry = state.iloc[1].to_dict()
    assert points.award("post", state, entry) == pytest.approx(5.0)
    assert points.award("frozen_bar", state, entry) == pytest.approx(10.0)
    unresolved = {**entry, "gain_lo": -0.01, "moved": False}
    assert points.award("frozen_bar", state, unresolved) == 0.0
    with pytest.raises(ValueError, match="rules"):
        points.award("nope", state, entry)
