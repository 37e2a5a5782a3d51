"""The arena's command line for scripts: ``--json`` output that pandas reads, help on every option, and the
results of ``dev``/``submit`` as dataclasses that still read like the dicts callers used."""

from __future__ import annotations

import argparse
import io
import json

import pandas as pd

from cachecraft_lib.arena.results import Entry, Rejection
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.cli import main


def _arena_verbs() -> dict[str, argparse.ArgumentParser]:
    from cachecraft_lib.cli import arena

    parser = argparse.ArgumentParser()
    arena.register(parser.add_subparsers())
    top = parser._subparsers._group_actions[0].choices["arena"]
    return next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_option_of_every_arena_verb_has_help():
    missing = [f"{verb} {a.option_strings or a.dest}" for verb, p in _arena_verbs().items() for a in p._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not missing
    for verb in ("dev", "submit", "leaderboard", "init"):
        assert "--json" in _arena_verbs()[verb].format_help()


def test_leaderboard_json_reads_into_pandas(tmp_path, capsys):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for name, overall in (("snapkv", 0.5), ("mine", 0.6)):
        ledger.append("baseline" if name == "snapkv" else "submission",
                      {"board": "A", "name": name, "author": name, "round": 1, "overall": overall, "lo": overall - 0.1,
                       "hi": overall + 0.1, "eligible": True, "moved": True})
    ledger.append("test_look", {"board": "A", "author": "mine", "program": "abc", "round": 1})
    cli = ["arena", "leaderboard", "--profile", "smoke", "--root", str(tmp_path), "--json"]
    assert main([*cli, "--public-key", ledger.public_key()]) == 0
    table = pd.read_json(io.StringIO(capsys.readouterr().out), lines=True)
    assert table.name.tolist() == ["mine", "snapkv"] and table.test_looks.tolist() == [1, 0]
    assert {"rank_range", "rank_basis", "overall", "lo", "hi", "points"} <= set(table.columns)


def test_results_are_dataclasses_that_read_like_the_old_dicts():
    payload = {"board": "A", "name": "m", "author": "me", "round": 1, "overall": 0.6, "lo": 0.5, "hi": 0.7,
               "best_before": "snapkv", "gain": 0.1, "gain_lo": 0.05, "gain_hi": 0.15, "moved": True,
               "eligible": True, "sandbox": "bwrap+seccomp+cgroup", "accuracy": 0.8, "origin": {"run": "x"}}
    entry = Entry.from_payload(payload, "entry-7", 12.5)
    assert entry.gain == entry["gain"] == 0.1 and entry["entry_id"] == "entry-7" and entry.points == 12.5
    assert entry.get("rejected") is False and entry["accuracy"] == 0.8 and entry.get("params_sha256") is None
    assert {**entry}["origin"] == {"run": "x"} and json.loads(json.dumps(entry.as_dict()))["points"] == 12.5
    rejection = Rejection("A", "m", "me", "me", "crash", "refused", True)
    assert rejection.get("rejected") and rejection["kind"] == "crash" and not hasattr(rejection, "gain")
