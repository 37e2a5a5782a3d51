"""A round's secret: ``arena init`` generates it (256 bits, outside the checkout, 0600) and prints the key's
fingerprint to pin; a secret a person typed passes only the stronger estimate (public sequences, keyboard walks,
phrases are refused though the old repeats-and-runs bound passed them) or an explicit, recorded waiver."""

from __future__ import annotations

import json
import stat
import string
from itertools import product
from pathlib import Path

import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.boards import splits, strength
from cachecraft_lib.arena.scoring import signing
from cachecraft_lib.cli import main

REPO = Path(__file__).resolve().parents[1]


def _de_bruijn_window(alphabet: str, n: int, start: int, length: int) -> str:
    """A window of B(k, n), after checking the sequence is one: every n-gram of the cycle exactly once."""
    sequence = strength._de_bruijn(alphabet, n)
    cycle = sequence + sequence[: n - 1]
    grams = [cycle[i: i + n] for i in range(len(sequence))]
    assert len(sequence) == len(alphabet) ** n and set(grams) == {"".join(p) for p in product(alphabet, repeat=n)}
    return sequence[start: start + length]


PUBLIC = {"de Bruijn": _de_bruijn_window(string.digits + "abcdef", 3, 1000, 64),
          "de Bruijn, lowercase": _de_bruijn_window(string.ascii_lowercase, 2, 40, 48),
          "keyboard walk": "qwertyuiop[]asdfghjkl;'zxcvbnm,./1234567890-=",
          "keyboard columns": "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/-['=]",
          "English sentence": "the quick brown fox jumps over the lazy dog",
          "a famous line": "Four score and seven years ago our fathers brought forth"}


@pytest.mark.parametrize("name", list(PUBLIC))
def test_typed_public_patterns_are_refused_by_the_stronger_estimate(name):
    typed = PUBLIC[name].encode()
    assert len(typed) >= splits.MIN_SECRET_BYTES and splits.entropy_bits(typed) >= splits.MIN_SECRET_BITS  # old bar
    with pytest.raises(splits.SecretMissing, match="too guessable") as err:
        splits.check_secret(typed)
    assert "--weak-secret-ok" in str(err.value) and PUBLIC[name] not in str(err.value)  # never echoed
    assert splits.check_secret(typed, weak_ok=True) == typed


def test_a_waived_weak_secret_is_recorded_in_the_round(tmp_path):
    typed = PUBLIC["English sentence"].encode()
    with pytest.raises(splits.SecretMissing):
        Arena("smoke", tmp_path / "strict", progress=False).ensure_round(typed, 1)
    arena = Arena("smoke", tmp_path / "waived", progress=False, weak_secret_ok=True)
    arena.ensure_round(typed, 1)
    round_ = arena.ledger.events()[0]["payload"]
    assert round_["weak_secret_ok"] is True and round_["secret_estimate_bits"] < splits.MIN_SECRET_BITS
    strong = Arena("smoke", tmp_path / "strong", progress=False, weak_secret_ok=True)
    strong.ensure_round(splits.new_secret().encode(), 1)  # the flag waives nothing for a strong secret
    assert strong.ledger.events()[0]["payload"]["weak_secret_ok"] is False


def test_init_generates_the_secret_outside_the_checkout_and_prints_the_fingerprint(tmp_path, capsys):
    root, secret_file = tmp_path / "arena", tmp_path / "config" / "secret"
    cli = ["arena", "init", "--profile", "smoke", "--root", str(root), "--secret-file", str(secret_file)]
    assert main([*cli, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    text = secret_file.read_text().strip()
    assert len(bytes.fromhex(text)) == 32 and stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    arena = Arena("smoke", root, progress=False)
    assert shown["fingerprint"] == signing.fingerprint(arena.ledger.public_key(), 32)
    assert shown["secret"] == str(secret_file.resolve()) and text not in json.dumps(shown)
    kinds = [e["kind"] for e in arena.ledger.events()]
    assert kinds == ["init", "round"]
    assert arena.reveal(text.encode())["matches"]  # the round commits to the file's secret
    assert arena.ledger.events()[1]["payload"]["secret_origin"] == "generated"
    assert main(["arena", "verify", "--profile", "smoke", "--root", str(root), "--public-key",
                 shown["fingerprint"]]) == 0
    capsys.readouterr()
    assert main(cli) == 2 and "already has events" in capsys.readouterr().err  # never a second init
    inside = ["arena", "init", "--profile", "smoke", "--root", str(tmp_path / "other"), "--secret-file",
              str(REPO / "data" / "arena_secret_test")]
    assert main(inside) == 2 and "inside the checkout" in capsys.readouterr().err
    assert not (REPO / "data" / "arena_secret_test").exists()
    assert main([*cli[:5], str(tmp_path / "third"), "--secret-file", str(secret_file)]) == 2  # no overwrite
    assert secret_file.read_text().strip() == text
