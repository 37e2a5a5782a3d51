"""One uid per sandbox, from a reserved range, for a root harness (as systemd's DynamicUser and nsjail do).

Why: every sandbox used to run as ``nobody`` (65534), shared with the host's own ``nobody`` processes and with
every other sandbox: the kernel's per-user quotas (pending signals, tasks, inotify instances) were shared, one
method queued 96,367 real-time signals against the uid's limit, and any process running as ``nobody`` could
read and write a sandbox's memory through ``/proc/<pid>/mem``. Now each sandbox leases a uid no one else holds:

- the range is ``UIDS_ENV`` (``FIRST-LAST``), by default ``DEFAULT_RANGE``: above the container ranges
  systemd hands out (524288-1879048191) and below its mountfsd and foreign ranges, so no account, no
  DynamicUser service and no container's mapped user is there;
- a lease is an exclusive ``flock`` on ``LEASES/<uid>`` held for the sandbox's life (two harnesses on one
  host never share one; the lock goes when the holder does, even killed);
- a uid with an account, or one some process runs as now, is skipped.

A harness that is not root cannot change its uid: its sandboxes run as its own (``lease_uid`` gives None), and
the limits the runtime sets on itself (RLIMIT_SIGPENDING, RLIMIT_NPROC, ...) bound what they take of it.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import random
from dataclasses import dataclass
from pathlib import Path

UIDS_ENV = "CACHECRAFT_SANDBOX_UIDS"  # FIRST-LAST: the uids a root harness leases one per sandbox
DEFAULT_RANGE = (1879048192, 1879048192 + 65535)  # 0x70000000 + 64 Ki: unused by systemd's documented ranges
LEASES = Path("/run/cachecraft-sandbox-uids")
SUBID_FILES = ("/etc/subuid", "/etc/subgid")  # ranges handed to users' rootless containers (podman, ...)


def uid_range() -> tuple[int, int]:
    """The first and last uid sandboxes may lease (``UIDS_ENV`` or ``DEFAULT_RANGE``)."""
    given = os.environ.get(UIDS_ENV, "").strip()
    if not given:
        return DEFAULT_RANGE
    try:
        first, last = (int(part) for part in given.split("-", 1))
    except ValueError:
        raise ValueError(f"{UIDS_ENV}={given!r} is not FIRST-LAST (two uids)") from None
    if not 0 < first <= last < 2**31 or first <= 65534 <= last:  # bubblewrap writes the uid map with %d: 2^31 and
        raise ValueError(f"{UIDS_ENV}={given!r}: uids between 1 and 2^31-1, not including nobody (65534)")  # up fail
    return first, last


@dataclass
class UidLease:
    """A uid held for one sandbox (``fd``: the held lock); ``release`` when its processes are gone."""

    uid: int
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


# Never the module-level `random`: drawing from it in the harness shifts the seeded sequence OpenEvolve samples
# parents with, and a search stops repeating itself (notebook 05's two runs diverged at iteration 5).
_PICK = random.SystemRandom()


def lease_uid(tries: int = 64) -> UidLease | None:
    """A uid of the range no one else holds, locked for the caller (None: not root, the harness's own uid)."""
    if os.geteuid() != 0:
        return None
    first, last = uid_range()
    LEASES.mkdir(mode=0o700, parents=True, exist_ok=True)
    in_use = _running_uids()
    for _ in range(tries):
        uid = _PICK.randint(first, last)  # the OS's randomness: the global `random` is the search's to seed
        if uid in in_use or _has_account(uid):
            continue
        fd = os.open(LEASES / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    raise OSError(f"no free uid in {first}-{last} after {tries} tries; widen {UIDS_ENV}")


def range_text() -> str:
    """The range in words, as ``cachecraft doctor`` names it."""
    first, last = uid_range()
    return f"{first}-{last} ({last - first + 1} uids)"


def conflicts() -> list[str]:
    """What on this host already uses a uid (or the same gid: a sandbox's gid is its uid) of the range: accounts,
    groups, ``/etc/subuid``/``/etc/subgid`` ranges (a user's containers may run as them) and running processes."""
    import grp

    first, last = uid_range()
    inside = range(first, last + 1)
    found = [f"account {p.pw_name} (uid {p.pw_uid})" for p in pwd.getpwall() if p.pw_uid in inside]
    found += [f"group {g.gr_name} (gid {g.gr_gid})" for g in grp.getgrall() if g.gr_gid in inside]
    for path in SUBID_FILES:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start, count = int(parts[1]), int(parts[2])
                if start <= last and start + count - 1 >= first:
                    found.append(f"{path}: {parts[0]} holds {start}-{start + count - 1}")
    found += [f"a process as uid {uid}" for uid in sorted(_running_uids()) if uid in inside and not _leased(uid)]
    return found


def _leased(uid: int) -> bool:
    """Whether a harness holds ``uid``'s lease now (its process is a sandbox, not a conflict)."""
    try:
        fd = os.open(LEASES / str(uid), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops the lock if it was taken
    return False


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _running_uids() -> set[int]:
    """The real uids of every process on the host now (one pass over ``/proc``)."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        found.add(int(line.split()[1]))
                        break
        except (OSError, ValueError, IndexError):
            pass
    return found
