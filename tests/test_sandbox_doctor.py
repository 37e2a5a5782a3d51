"""``cachecraft doctor``: the boundary this machine gives, in words and as JSON, and what to do when a part is missing."""

from __future__ import annotations

import json

from sandbox_helpers import expected_boundary

from cachecraft_lib.cli import main
from cachecraft_lib.sandbox import boundary, cgroup_mode, diagnose


def test_doctor_says_which_boundary_this_machine_gives(capsys):
    assert main(["doctor", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["boundary"] == expected_boundary() and found["whole"] is True
    assert found["level"] == diagnose.LEVELS[expected_boundary()]
    assert set(found["parts"]) == {"bwrap", "seccomp", "cgroup", "uid outside"}
    assert found["parts"]["bwrap"].startswith("ok") and found["parts"]["seccomp"].startswith("ok")


def test_doctor_without_a_cgroup_is_whole_and_says_how_to_get_one(monkeypatch, capsys):
    monkeypatch.setattr(boundary, "detect", lambda: cgroup_mode.CgroupMode(None, why="no cgroup v1: test"))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sandbox boundary: whole, no cgroup (bwrap+seccomp+rlimits)")
    assert "Delegate=yes" in out and "systemd-run --user --scope" in out and "no cgroup v1: test" in out


def test_doctor_with_a_part_missing_is_weak_and_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(boundary, "missing_parts", lambda: {"bwrap": "no bubblewrap"})
    monkeypatch.setattr(boundary, "detect", lambda: cgroup_mode.CgroupMode(None, why="none here"))
    assert main(["doctor", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["level"] == "weak" and found["whole"] is False and found["boundary"] == "weak: seccomp; missing bwrap"
    advice = " ".join(found["advice"])
    assert "apt-get install -y bubblewrap" in advice and boundary.WEAK_ENV in advice and "Delegate=yes" in advice
