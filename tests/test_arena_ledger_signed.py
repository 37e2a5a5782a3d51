"""The signed ledger: a forged event, a re-chained (re-signed) ledger and a truncated one (head file removed) fail
``verify`` against the published head or the public key; an honest ledger verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cachecraft_lib.arena.scoring import signing
from cachecraft_lib.arena.scoring.ledger import Ledger, LedgerTampered, _digest

REPO = Path(__file__).parents[1]


def _ledger(root: Path, n: int = 5) -> Ledger:
    ledger = Ledger(root / "ledger.jsonl")
    ledger.append("round", {"round": 1, "commitment": "c" * 64, "salt": "s" * 32})
    for i in range(n - 1):
        ledger.append("submission", {"name": f"m{i}", "author": "me", "overall": 0.5 + i / 100})
    return ledger


def _lines(ledger: Ledger) -> list[dict]:
    return [json.loads(line) for line in ledger.path.read_text().splitlines()]


def _write(ledger: Ledger, events: list[dict]) -> None:
    ledger.path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in events))


def _rechain(ledger: Ledger, events: list[dict], key) -> None:
    """What a forger with their own key does: recompute every hash, re-sign, replace the key and the head."""
    prev = "0" * 64
    for seq, e in enumerate(events):
        e.update(seq=seq, prev=prev)
        e["hash"] = _digest(e)
        e["sig"] = signing.sign(key, e["hash"].encode())
        prev = e["hash"]
    _write(ledger, events)
    ledger.public_path.write_text(signing.public_hex(key) + "\n")
    body = signing.head_body(len(events), prev, signing.public_hex(key))
    ledger.head_path.write_text(json.dumps({**body, "signature": signing.sign(key, signing.canonical(body))}))


def test_an_honest_ledger_verifies_with_its_published_head(tmp_path):
    ledger = _ledger(tmp_path)
    head = ledger.publish_head(tmp_path / "published")
    result = ledger.verify(head=head)
    assert result.ok and result.status == "ok" and result.events == 5 and result.head_checked
    ledger.append("points", {"name": "m0", "points": 1.0})  # a ledger that grew after publishing still verifies
    assert ledger.verify(head=head).ok
    assert (tmp_path / "private" / signing.PRIVATE_NAME).stat().st_mode & 0o077 == 0  # the key is the organiser's
    assert set(result.as_dict()) >= {"status", "ok", "message", "events", "line", "fingerprint", "head_checked"}


def test_a_forged_event_fails_even_with_its_hash_recomputed(tmp_path):
    ledger = _ledger(tmp_path)
    events = _lines(ledger)
    events[2]["payload"]["overall"] = 0.99
    events[2]["hash"] = _digest(events[2])  # the chain after it breaks, unless re-chained; the signature never holds
    _write(ledger, events)
    result = ledger.verify()
    assert result.status == "tampered" and result.line == 3
    with pytest.raises(LedgerTampered, match="line 3"):
        ledger.events()


def test_a_rechained_ledger_fails_against_the_published_head_and_key(tmp_path):
    ledger = _ledger(tmp_path)
    published = json.loads(ledger.publish_head(tmp_path / "published").read_text())
    events = _lines(ledger)
    events[1]["payload"]["overall"] = 0.99
    _rechain(ledger, events, Ed25519Forger.key())
    assert len(ledger.events()) == 5  # self-consistent: the folder alone cannot tell
    assert ledger.verify(head=published).status == "wrong_key"
    assert ledger.verify(public_key=published["public_key"]).status == "wrong_key"
    ledger.public_path.write_text(published["public_key"] + "\n")  # put the right key back: signatures fail
    assert ledger.verify(head=published).status == "tampered"


def _strip(ledger: Ledger, rules_version: str | None = None) -> None:
    """A downgrade: signatures stripped, ``ledger.pub`` and the head deleted, a score edited, the chain recomputed
    (``rules_version``: also rewrite every event's rules version)."""
    events, prev = _lines(ledger), "0" * 64
    for seq, e in enumerate(events):
        e.pop("sig")
        e.update(seq=seq, prev=prev, **({"rules_version": rules_version} if rules_version else {}))
        e["payload"]["overall"] = 0.99 if seq == 2 else e["payload"].get("overall")
        e["hash"] = prev = _digest(e)
    _write(ledger, events)
    ledger.public_path.unlink()
    ledger.head_path.unlink()


def test_stripped_signatures_are_a_downgrade_not_an_unsigned_ledger(tmp_path):
    ledger = _ledger(tmp_path)
    _strip(ledger)
    result = Ledger(ledger.path).verify()
    assert result.status == "tampered" and result.line == 1 and "downgrade" in result.message and not result.ok
    with pytest.raises(LedgerTampered, match="line 1 declares rules version arena-3"):
        Ledger(ledger.path).events()


def test_a_ledger_from_before_signing_reads_unsigned_and_not_ok(tmp_path):
    ledger = _ledger(tmp_path)
    _strip(ledger, rules_version="arena-2")  # what a pre-signing ledger looks like (and a bolder forgery)
    assert len(Ledger(ledger.path).events()) == 5
    result = Ledger(ledger.path).verify()
    assert result.status == "unsigned" and not result.ok


def test_a_truncated_ledger_without_its_head_fails_against_the_published_head(tmp_path):
    ledger = _ledger(tmp_path)
    published = ledger.publish_head(tmp_path / "published")
    _write(ledger, _lines(ledger)[:3])
    ledger.head_path.unlink()  # the local head goes with the cut lines
    assert len(ledger.events()) == 3  # a valid, signed prefix
    result = ledger.verify(head=published)
    assert result.status == "truncated" and result.head_events == 5 and not result.ok


def test_a_forged_head_is_refused(tmp_path):
    ledger = _ledger(tmp_path)
    head = json.loads(ledger.publish_head(tmp_path / "published").read_text())
    head["events"] = 2
    assert ledger.verify(head=head).status == "bad_head"


def test_nobody_appends_without_the_private_key(tmp_path):
    ledger = _ledger(tmp_path)
    (tmp_path / "private" / signing.PRIVATE_NAME).unlink()
    with pytest.raises(signing.KeyMissing):
        ledger.append("points", {"name": "m0", "points": 1.0})


@pytest.mark.slow
def test_cli_verify_against_a_published_head(tmp_path):
    ledger = _ledger(tmp_path / "arena")
    head = ledger.publish_head(tmp_path / "published")

    def verify() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "arena", "verify", "--profile", "smoke",
                               "--root", str(tmp_path / "arena"), "--head", str(head)], cwd=REPO,
                              capture_output=True, text=True)

    ok = verify()
    assert ok.returncode == 0 and ": ok:" in ok.stdout
    _write(ledger, _lines(ledger)[:4])
    ledger.head_path.unlink()
    cut = verify()
    assert cut.returncode == 1 and "truncated" in cut.stdout


class Ed25519Forger:
    @staticmethod
    def key():
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.generate()
