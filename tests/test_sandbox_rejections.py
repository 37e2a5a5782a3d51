"""What a refused run shows the public: ``Arena.submit``'s returned rejection and its ledger line carry the fixed
fields only (``refusals.PUBLIC_FIELDS``): nothing of the error, which on the organiser's machine may hold its
uptime, memory, kernel, disk and CPUs (issue 57). The run itself is replaced by one that fails so (no model:
a few seconds)."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

import pytest

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.scoring import refusals
from cachecraft_lib.arena.submissions.errors import SubmissionError

GOOD = Path(__file__).parent / "assets" / "arena" / "good_scores"
SECRET = hashlib.sha256(b"cachecraft tests: rejections carry no host facts").hexdigest().encode()
FACTS = {"kernel": platform.release(), "uptime": "up 123456 s", "memory": "MemTotal 8123456 kB",
         "disk": "f_blocks 98765432", "cpus": f"cpus {os.cpu_count()}x", "marker": "HOST-FACT-MARKER"}


class Odd(SubmissionError):
    """An error that carries more than its kind and text (attributes a careless payload might copy)."""

    def __init__(self) -> None:
        super().__init__("crash", "FACTS " + repr(FACTS))
        self.message, self.host = str(self), dict(FACTS)


@pytest.mark.parametrize("error", [SubmissionError("crash", "FACTS " + repr(FACTS)), Odd(),
                                   SubmissionError("not-a-kind " + FACTS["marker"], "x")])
def test_a_refused_run_returns_and_records_only_the_fixed_fields(tmp_path, monkeypatch, error):
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    monkeypatch.setattr(Arena, "record_baselines", lambda self, *a, **k: None)
    monkeypatch.setattr(Arena, "behaviour", lambda self, *a, **k: {})

    def fails(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(Arena, "run_test", fails)
    out = arena.submit(GOOD, "A", SECRET)
    kind = error.kind if error.kind in ("crash",) else "crash"
    assert out.rejected and out.on_test and out.kind == kind
    assert out.message == refusals.public_message(kind, True)  # the returned message, not only the ledger's
    shown = out.as_dict()
    assert set(shown) == {*refusals.PUBLIC_FIELDS, "rejected"}
    public = str(shown) + "".join(p.read_text() for p in arena.root.glob("ledger*"))
    assert not [fact for fact in FACTS.values() if fact in public], public
    assert arena.ledger.events()[-1]["payload"] == {k: v for k, v in shown.items() if k != "rejected"}
    assert FACTS["marker"] in (arena.root / "private" / refusals.ORGANISER_LOG).read_text()  # the organiser's
