"""Every command that runs untrusted code, on a machine without the sandbox's boundary (bubblewrap named by
CACHECRAFT_BWRAP but not there, as on a machine without it): one ``error:`` line naming what is missing and
``cachecraft doctor``, exit status 2, no traceback, nothing recorded and no model loaded (issue 57). Each
answers in well under a second: the boundary is checked before anything else."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from cachecraft_lib.arena.boards import splits
from cachecraft_lib.cli import main
from cachecraft_lib.sandbox import boundary, bwrap

GOOD = Path(__file__).parent / "assets" / "arena" / "good_scores"


def entries(tmp: Path) -> dict[str, list[str]]:
    arena = ["--board", "A", "--profile", "smoke", "--root", str(tmp / "arena")]
    return {"evolve": ["evolve", "--profile", "smoke", "--iterations", "1", "--out", str(tmp / "evolve")],
            "arena dev": ["arena", "dev", str(GOOD), *arena],
            "arena submit": ["arena", "submit", str(GOOD), *arena],
            "arena search": ["arena", "search", *arena, "--iterations", "1", "--out", str(tmp / "search")],
            "arena submit-search": ["arena", "submit-search", str(tmp / "run"), *arena],
            "arena judge": ["arena", "judge", str(GOOD), *arena, "--record"]}


@pytest.fixture
def no_bubblewrap(monkeypatch, tmp_path):
    monkeypatch.setenv(bwrap.BWRAP_ENV, str(tmp_path / "no-bwrap-here"))
    monkeypatch.delenv(boundary.WEAK_ENV, raising=False)
    monkeypatch.setenv(splits.SECRET_ENV, hashlib.sha256(b"cachecraft tests: no boundary at the CLI").hexdigest())
    boundary._probe.cache_clear()
    yield
    boundary._probe.cache_clear()


@pytest.mark.parametrize("entry", list(entries(Path("x"))))
def test_a_command_that_runs_code_says_what_is_missing_in_one_line(tmp_path, capsys, no_bubblewrap, entry):
    (tmp_path / "run").mkdir()
    start = time.monotonic()
    status = main(entries(tmp_path)[entry])
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in out + err, err
    assert f"{bwrap.BWRAP_ENV} names no executable" in err and "cachecraft doctor" in err, err
    ledger = tmp_path / "arena" / "ledger.jsonl"
    assert not ledger.exists() or not ledger.read_text(), "something was recorded"
    assert not (tmp_path / "evolve").exists() and not (tmp_path / "search").exists()
    assert took < 30, took  # no model loaded, no search started (a fresh process's failure was a traceback)


def test_a_command_that_runs_no_code_still_works(capsys, no_bubblewrap):
    assert main(["arena", "boards", "--profile", "smoke"]) == 0
    assert "error" not in capsys.readouterr().err
    assert os.environ[bwrap.BWRAP_ENV].endswith("no-bwrap-here")
