"""``cachecraft doctor``: the boundary this machine gives, in words and as JSON, and what to do when a part is missing."""

from __future__ import annotations

import json
import os

import pytest
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


def test_doctor_names_the_uid_range_and_what_must_not_use_it(monkeypatch, tmp_path):
    """A root harness: the exact range its sandboxes lease from, what must not use it (accounts, groups, subordinate
    ranges, containers) and what does now (a /etc/subuid range overlapping it); an unprivileged one: its own uid, no
    subordinate ranges needed."""
    from cachecraft_lib.sandbox import bwrap, uids

    subuid = tmp_path / "subuid"
    subuid.write_text("alice:100000:65536\nbob:2000000000:10\nmallory:1999999990:20\n")
    monkeypatch.setenv(uids.UIDS_ENV, "2000000000-2000000099")
    monkeypatch.setattr(uids, "SUBID_FILES", (str(subuid),))
    monkeypatch.setattr(bwrap, "outside_uid", lambda: 2000000000)
    monkeypatch.setattr(boundary, "missing_parts", lambda: {"bwrap": "not tried by this test"})
    found = diagnose.diagnose()
    assert "leased from 2000000000-2000000099 (100 uids)" in found.parts["uid outside"]
    advice = "\n".join(found.advice)
    assert "uids 2000000000-2000000099 (100 uids)" in advice and "/etc/subuid or /etc/subgid" in advice
    assert f"{subuid}: bob holds 2000000000-2000000009" in advice and "mallory holds 1999999990-2000000009" in advice
    assert "alice" not in advice
    monkeypatch.setattr(bwrap, "outside_uid", lambda: None)
    found = diagnose.diagnose()
    assert found.parts["uid outside"].startswith(f"{os.geteuid()} (the harness's own")
    assert "no /etc/subuid or /etc/subgid entry is needed" in "\n".join(found.advice)
    monkeypatch.setenv(uids.UIDS_ENV, "3000000000-3000000099")  # bubblewrap's uid map takes no uid past 2^31-1
    with pytest.raises(ValueError, match="2\\^31-1"):
        uids.uid_range()
