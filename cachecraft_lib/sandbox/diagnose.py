"""Which boundary this machine gives the sandbox, and what to install or configure for the full one.

``diagnose()`` checks the parts as ``boundary.plan`` does (never raising) and says, for an organiser, which
of four levels this machine reaches: ``full v1`` / ``full v2`` (bubblewrap + the filter + a cgroup v1 or
v2), ``whole, no cgroup`` (bubblewrap + the filter; one process under its own limits), or ``weak`` (a part
of the wall is missing: nothing untrusted runs unless weakening is allowed), what it found about the cgroups
(the hierarchy, this process's cgroup and whether it was delegated, the user's systemd manager), and one line
of advice per missing part, for the organiser's own case (root or not, cgroup v1 or v2). ``cachecraft doctor``
prints it (``--json`` for scripts).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import asdict, dataclass, field

from . import boundary, bwrap, cgroup_mode, seccomp, uids

LEVELS = {boundary.FULL: "full v1", boundary.FULL_V2: "full v2", boundary.NO_CGROUP: "whole, no cgroup"}


@dataclass
class Diagnosis:
    """The boundary's name and level, each part's state, and what to do for the full boundary."""

    boundary: str
    level: str
    parts: dict[str, str]
    advice: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)  # the cgroup facts behind the "cgroup" part

    @property
    def whole(self) -> bool:
        return self.level != "weak"

    def as_dict(self) -> dict:
        return {**asdict(self), "whole": self.whole}


def _v2_advice(euid: int) -> str | None:
    """What to enable on a cgroup v2 machine, for a root or an unprivileged harness (None elsewhere)."""
    if not cgroup_mode.hierarchy().startswith("cgroup v2"):
        return None
    if euid == 0:
        return ("as root on cgroup v2: start the harness in a delegated cgroup, e.g. `systemd-run --scope -p "
                "Delegate=yes --quiet -- cachecraft arena ...` (or Delegate=yes in the unit that runs it): each "
                "sandbox then gets its own cgroup under it")
    try:
        user = pwd.getpwuid(euid).pw_name
    except KeyError:
        user = "$USER"
    return (f"as {user} on cgroup v2: a systemd user manager, which gives each sandbox a `systemd-run --user "
            f"--scope`: `sudo loginctl enable-linger {user}` (it then runs from boot, no login needed), "
            f"`apt-get install dbus-user-session` (its bus), and `systemd-run --user --scope true` working in "
            f"the harness's shell (a login sets XDG_RUNTIME_DIR; /run/user/{euid} is used where it is unset)")


def _cgroup_advice(mode: cgroup_mode.CgroupMode, euid: int) -> list[str]:
    if cgroup_mode.forced_off():
        return [f"unset {cgroup_mode.NO_CGROUP_ENV} to use a cgroup where this machine has one"]
    specific = _v2_advice(euid)
    return [*([specific] if specific else []),
            "for a cgroup (memory and tasks of the whole sandbox): on cgroup v2, run the harness in a delegated "
            "cgroup (a systemd unit with Delegate=yes, or a container that delegates its cgroup) or in a systemd "
            "user session (`loginctl enable-linger $USER`; then `systemd-run --user --scope` works); on cgroup v1, "
            "run as root or make memory, pids and cpuacct folders writable for this user. "
            f"(Why none now: {mode.why})"]


def _uid_advice(root: bool) -> list[str]:
    """What the organiser must make sure of about the uids the sandboxes run as (one line, two where the reserved
    range is in use on this host)."""
    if not root:
        return [f"the sandboxes run as this harness's uid {os.geteuid()} (an unprivileged harness cannot change "
                "uid; bubblewrap maps only it, so no /etc/subuid or /etc/subgid entry is needed): give the harness an "
                "account of its own, so that its sandboxes share per-user counts with nothing else; the reserved "
                f"range {uids.range_text()} is used only by a root harness"]
    lines = [f"as root: no account, group, service (DynamicUser), /etc/subuid or /etc/subgid range and no "
             f"container's mapped user may use uids {uids.range_text()}: each sandbox runs as one of them and a host "
             f"process with the same uid could read its memory and share its per-user counts (set {uids.UIDS_ENV}="
             "FIRST-LAST to a free range otherwise)"]
    found = uids.conflicts()
    if found:
        lines.append(f"in use in that range now: {'; '.join(found[:8])}{' ...' if len(found) > 8 else ''} (a uid with "
                     "an account or a running process is skipped when leasing; the /etc/subuid and /etc/subgid "
                     "ranges are not: move them or the range)")
    return lines


def diagnose() -> Diagnosis:
    """This machine's boundary (``boundary.plan`` with weakening allowed, so it never raises) and advice."""
    plan = boundary.plan(allow_weak=True)
    mode = plan.cgroup
    exe = bwrap.find()
    uid = bwrap.outside_uid()
    parts = {
        "bwrap": plan.missing.get("bwrap") or f"ok ({exe})",
        "seccomp": plan.missing.get("seccomp") or "ok (default-deny allowlist, libseccomp)",
        "cgroup": {"v1": "ok (cgroup v1)", "v2": f"ok (cgroup v2, delegated: {mode.parent})",
                   "scope": "ok (cgroup v2, systemd user scope)"}.get(mode.kind, f"none: {mode.why}"),
        "uid outside": (f"one per sandbox, leased from {uids.range_text()} (the harness is root; {uids.UIDS_ENV}="
                        "FIRST-LAST changes the range)" if uid is not None else
                        f"{os.geteuid()} (the harness's own, unprivileged: every sandbox runs as it)"),
    }
    advice = []
    if "bwrap" in plan.missing:
        advice.append(f"bubblewrap: {boundary.INSTALL_BWRAP}; it needs unprivileged user namespaces")
    if "seccomp" in plan.missing:
        advice.append(f"seccomp: {seccomp.missing()}")
    if mode.kind is None:
        advice += _cgroup_advice(mode, os.geteuid())
    advice += _uid_advice(uid is not None)
    if "bwrap" in plan.missing or "seccomp" in plan.missing:
        advice.append(f"until then nothing untrusted runs; to run anyway behind a weaker boundary (recorded with "
                      f"every result) pass --allow-weak-sandbox or set {boundary.WEAK_ENV}=1")
    return Diagnosis(plan.name, LEVELS.get(plan.name, "weak"), parts, advice, cgroup_mode.facts())


def report(found: Diagnosis) -> str:
    """``found`` as lines for a terminal."""
    lines = [f"sandbox boundary: {found.level} ({found.boundary})"]
    lines += [f"  {part}: {state}" for part, state in found.parts.items()]
    lines += ["found:", *(f"  {fact}" for fact in found.found)] if found.found else []
    if found.advice:
        lines.append("for the full boundary:" if found.whole else "to make it whole:")
        lines += [f"  - {line}" for line in found.advice]
    return "\n".join(lines)
