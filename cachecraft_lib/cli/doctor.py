"""``cachecraft doctor``: which sandbox boundary this machine gives, and what to install for the full one."""

from __future__ import annotations

import argparse
import json

SANDBOXED = ("dev", "submit", "search", "submit-search", "judge")  # arena verbs that run a submission's or program's code


def require_boundary(args: argparse.Namespace) -> None:
    """Before an arena verb that runs untrusted code does anything (loads a model, records a plan, writes the
    ledger): ``BoundaryUnavailable`` where the sandbox cannot be set up, which the verb prints as one ``error:``
    line naming what is missing and this command (a trusted ``baseline:NAME`` needs no sandbox)."""
    if str(getattr(args, "folder", "")).startswith("baseline:"):
        return
    from ..sandbox.boundary import plan

    plan(bool(getattr(args, "allow_weak_sandbox", False)))


def boundary_first(func):
    """``func`` (an arena verb) after ``require_boundary``."""
    def run(args: argparse.Namespace):
        require_boundary(args)
        return func(args)
    return run


def run(args: argparse.Namespace) -> int:
    from ..sandbox.diagnose import diagnose, report

    found = diagnose()
    print(json.dumps(found.as_dict(), indent=2) if args.json else report(found))
    return 0 if found.whole else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``doctor``."""
    p = sub.add_parser("doctor", help="which sandbox boundary this machine gives untrusted code",
                       description="Checks bubblewrap, the seccomp filter, cgroups (v1, v2 delegated or a systemd "
                                   "user scope) and the uid the sandbox runs as outside; prints the boundary (full v1, "
                                   "full v2, whole without a cgroup, or weak) and what to install or configure for "
                                   "the full one. Exit code 0 when the boundary is whole, 1 when it is weak.")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (boundary, level, parts, advice)")
    p.set_defaults(func=run)
