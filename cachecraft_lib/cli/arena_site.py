"""``cachecraft arena site OUT``: the leaderboard as a static web site, generated from the ledger."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

SITE_HELP = ("write the leaderboard as a static site (index of boards and rules, a table per board, a page per "
             "entry, the ledger's verification status) into OUT, from the ledger alone")


def _cmd_site(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.scoring.verify import read_pin
    from ..arena.site import write_site

    arena = Arena(args.profile, Path(args.root) if args.root else None)
    check = write_site(arena.ledger.path, args.out, args.submissions, args.profile, read_pin(args.public_key),
                       args.head)
    print(f"wrote {Path(args.out) / 'index.html'}: {check.count} events, head {check.head[:16]}..., "
          f"{check.message}")
    if not check.clean:
        print(f"error: the ledger does not verify ({check.message}); the site says so on every page",
              file=sys.stderr)
        return 1
    if not check.ok:
        print("note: signed, key not pinned: pass --public-key (the fingerprint `arena init` printed) or --head "
              "for the pages to say verified", file=sys.stderr)
    return 0


def add_site_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``site`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("site", _cmd_site, SITE_HELP)
    p.add_argument("out", help="folder to write (index.html, boards/, entries/, style.css); upload it to any "
                               "static host")
    p.add_argument("--submissions", nargs="*", default=[], metavar="DIR",
                   help="submission folders whose DESCRIPTION.md to show (matched to the ledger by their code's "
                        "sha256; the shipped examples are always included); dev reports come only from the "
                        "arena's dev/ folder (`arena judge --run-dev`), never from a submission folder")
    p.add_argument("--public-key", metavar="KEY",
                   help="the organiser's public key pinned outside the arena folder: its fingerprint (printed by "
                        "`arena init`), the key (64 hex) or a file holding it; without it (or --head) the pages "
                        "say 'signed, key not pinned'")
    p.add_argument("--head", help="a published head (ledger_head.json) to verify against")
    return p
