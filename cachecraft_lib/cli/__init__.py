"""The ``cachecraft`` command line: ``cachecraft SUBCOMMAND --help`` explains each one.

One module per group of verbs; each adds its parsers in ``register``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from . import arena, doctor, evolve, grid, latency, serve, suite, tiny

GROUPS = (suite, tiny, grid, latency, evolve, serve, arena, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cachecraft", description=(
        "CacheCraft Lab: reproduce the CacheCraft paper (KV-cache eviction policies found by program "
        "evolution, and FRC) on the embedded tiny model or on the paper's models."))
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version of cachecraft_lib and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: the verb has saved what finished (and said so); no traceback
        print("interrupted", file=sys.stderr)
        return 130
