"""The signed ledger: a forged event, a re-chained (re-signed) ledger, a forked one and a truncated one (head file
removed) fail ``verify`` against the published head or the pinned public key; an honest ledger verifies only
against a pin (without one it is "signed, key not pinned"); a ledger without signatures is refused by the
leaderboard."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cachecraft_lib.arena.scoring import signing
from cachecraft_lib.arena.scoring.ledger import RULES_VERSION, Ledger, LedgerTampered, _digest
from cachecraft_lib.arena.scoring.verify import LedgerUntrusted, trusted_events

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


def test_without_a_pin_a_signed_ledger_is_not_verified(tmp_path):
    """The folder's own ``ledger.pub`` is whatever its writer put there: signed, key not pinned."""
    ledger = _ledger(tmp_path)
    result = ledger.verify()
    assert result.status == "unpinned" and not result.ok and result.signed
    assert result.shown == "signed, key not pinned" and "verified" not in result.shown
    pinned = ledger.verify(public_key=signing.fingerprint(ledger.public_key(), 32))  # the fingerprint init prints
    assert pinned.ok and pinned.shown == "verified"
    assert ledger.verify(public_key="0" * 32).status == "wrong_key"  # a fingerprint of another key


def test_a_ledger_resigned_with_another_key_fails_verify_with_the_public_key(tmp_path, capsys):
    from cachecraft_lib.cli import main

    ledger = _ledger(tmp_path / "arena")
    pinned = signing.fingerprint(ledger.public_key(), 32)
    cli = ["arena", "verify", "--profile", "smoke", "--root", str(tmp_path / "arena"), "--public-key"]
    assert main([*cli, pinned]) == 0 and ": verified:" in capsys.readouterr().out
    events = _lines(ledger)
    events[1]["payload"]["overall"] = 0.99
    _rechain(ledger, events, Ed25519Forger.key())  # new key, new ledger.pub, new local head: self-consistent
    assert len(ledger.events()) == 5
    assert main([*cli, pinned]) == 1 and "wrong_key" in capsys.readouterr().out
    assert main(cli[:-1]) == 1 and "signed, key not pinned" in capsys.readouterr().out  # no pin: never verified
    key_file = tmp_path / "organiser.pub"
    key_file.write_text(_lines(ledger)[0]["sig"][:64] + "\n")  # any other 64-hex key, from a file
    assert main([*cli, str(key_file)]) == 1
    assert main([*cli, "not-a-key"]) == 2 and "fingerprint" in capsys.readouterr().err


def test_every_event_declares_the_arenas_rules_version(tmp_path):
    """A board's own rules version stays in the payload; stripping signatures shows on any line, the first
    included, whatever kind it is."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("baseline", {"board": "A", "name": "snapkv", "rules_version": "rules-1"})
    ledger.append("submission", {"board": "A", "name": "m", "rules_version": "rules-1"})
    events = ledger.events()
    assert {e["rules_version"] for e in events} == {RULES_VERSION} and events[0]["payload"]["rules_version"] == "rules-1"
    _strip(ledger)
    with pytest.raises(LedgerTampered, match=f"line 1 declares rules version {RULES_VERSION}"):
        Ledger(ledger.path).events()


@pytest.mark.parametrize("rules_version", [None, "arena-2"])
def test_a_downgraded_or_unsigned_ledger_is_refused_by_the_leaderboard(tmp_path, capsys, rules_version):
    from cachecraft_lib.cli import main

    ledger = _ledger(tmp_path / "arena")
    _strip(ledger, rules_version)
    with pytest.raises(LedgerUntrusted, match="unsigned|tampered"):
        trusted_events(Ledger(ledger.path))
    assert main(["arena", "leaderboard", "--profile", "smoke", "--root", str(tmp_path / "arena")]) == 2
    err = capsys.readouterr()
    assert "is not shown" in err.err and "0.99" not in err.out


def test_a_forked_ledger_fails_against_the_published_head(tmp_path):
    """The organiser's own key rewrites history after publishing: chain and signatures hold, the head does not."""
    ledger = _ledger(tmp_path)
    published = ledger.publish_head(tmp_path / "published")
    events = _lines(ledger)
    events[3]["payload"]["overall"] = 0.99
    _rechain(ledger, events, signing.load_private(ledger.key_path))
    assert ledger.verify(public_key=ledger.public_key()).ok  # the folder alone cannot tell
    result = ledger.verify(head=published)
    assert result.status == "forked" and result.line == 5 and not result.ok


def test_a_head_naming_another_key_is_refused(tmp_path):
    ledger = _ledger(tmp_path)
    pinned = ledger.public_key()
    forger = Ed25519Forger.key()
    body = signing.head_body(5, _lines(ledger)[-1]["hash"], signing.public_hex(forger))
    head = {**body, "signature": signing.sign(forger, signing.canonical(body))}  # well signed, by another key
    result = ledger.verify(head=head, public_key=pinned)
    assert result.status == "bad_head" and "another public key" in result.message and not result.ok


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
    with pytest.raises(LedgerTampered, match=f"line 1 declares rules version {RULES_VERSION}"):
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
    assert ok.returncode == 0 and ": verified:" in ok.stdout
    _write(ledger, _lines(ledger)[:4])
    ledger.head_path.unlink()
    cut = verify()
    assert cut.returncode == 1 and "truncated" in cut.stdout


class Ed25519Forger:
    @staticmethod
    def key():
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.generate()


def test_reads_verify_only_new_lines_and_an_edited_prefix_is_still_caught(tmp_path, monkeypatch):
    """The verified prefix is kept (keyed by its bytes' size and SHA-256): a read after an append checks the new
    line alone, and an edit inside the prefix, even one that keeps the file's size, is verified from line 1."""
    ledger = _ledger(tmp_path)
    assert len(ledger.events()) == 5
    checked = []
    real = signing.valid
    monkeypatch.setattr(signing, "valid", lambda *a: checked.append(a) or real(*a))
    ledger.append("points", {"name": "m0", "points": 1.0})
    assert len(ledger.events()) == 6 and len(checked) == 1  # the appended line, verified once
    text = ledger.path.read_text()
    ledger.path.write_text(text.replace('"overall": 0.51', '"overall": 0.91', 1))  # same size, signed line edited
    assert ledger.path.stat().st_size == len(text.encode())
    with pytest.raises(LedgerTampered, match="line 3"):
        ledger.events()
