"""One vocabulary for the two searches (``cachecraft arena search`` and ``cachecraft evolve``).

The same thing has the same option name in both commands: ``--seed-program`` (the program a search starts from),
``--random-seed`` (the run's random seed; ``--seed N`` with a number means the same), ``--iterations`` (the run's
budget in evaluations), ``--root`` (the arena's folder), ``--out`` (the run folder), ``--board``, ``--profile``,
``--structural``/``--linear-only`` (the offline mutator's operators) and, for what is submitted, ``--top``. The
spellings used before (``--generations``, ``--arena-root``, ``--select-top``, and ``--seed NAME`` for the seed
program) keep working and warn (once each: when given). ``SHARED`` is what the option-name test holds both commands to.
"""

from __future__ import annotations

import argparse
import sys
import warnings

SHARED = ("--board", "--seed-program", "--seed", "--random-seed", "--iterations", "--generations", "--root",
          "--arena-root", "--out", "--profile", "--structural", "--linear-only")
DEPRECATED = {"--generations": "--iterations", "--arena-root": "--root", "--select-top": "--top",
              "--seed NAME": "--seed-program"}


class DefaultsShown(argparse.HelpFormatter):
    """Help that shows every option's default: one whose help does not say it gets ``(default: ...)``."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


def warn_deprecated(old: str, new: str, note: str = "") -> None:
    """A FutureWarning and one stderr line for an old spelling (given once on a command line: warned once)."""
    text = f"{old} is deprecated: use {new}{(' (' + note + ')') if note else ''}"
    warnings.warn(text, FutureWarning, stacklevel=3)
    print(f"warning: {text}", file=sys.stderr)


class Deprecated(argparse.Action):
    """An old spelling: stores into the new option's ``dest`` and warns (``warn_deprecated``) when parsed."""

    def __init__(self, option_strings, dest, new: str = "", convert=None, **kwargs) -> None:
        self.new, self.convert = new, convert
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        warn_deprecated(option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, self.convert(values) if self.convert else values)


class SeedOption(argparse.Action):
    """``--seed``: a number is the random seed (as in ``ruler generate``); anything else is the old spelling of the
    seed program, kept in ``seed_alias`` until ``seed_program`` reads it (and warns)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        text = str(values)
        if text.lstrip("-").isdigit():
            value = int(text)
            if not 0 <= value < 2**31:
                parser.error(f"a random seed is 0 <= N < 2**31, got {text}")
            namespace.random_seed = value
        else:
            namespace.seed_alias = namespace.seed_program = text


def seed_program(args: argparse.Namespace) -> str:
    """The seed program: ``--seed-program``, or the old ``--seed NAME`` with a warning."""
    if getattr(args, "seed_alias", None) is not None:
        warn_deprecated("--seed", "--seed-program", "--seed N, a number, is the random seed")
    return args.seed_program


def random_seed(text: str) -> int:
    """``--random-seed(s)``: an int with 0 <= N < 2**31 (the ledger refuses others)."""
    value = int(text)
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"a random seed is 0 <= N < 2**31, got {text}")
    return value


BOARD_HELP = "a board of the profile's board file that evicts at prefill (`cachecraft arena boards` lists them)"


def check_board(command: str, board: str | None, profile: str) -> None:
    """Refuse (exit 2) a board the search's fitness does not cover, naming the ones it does (from the board file)."""
    from ..search.search_boards import search_boards

    boards = search_boards(profile)
    if board is not None and board not in boards:
        print(f"{command}: --board {board}: the search runs on the prefill boards of profile {profile}: "
              f"{', '.join(boards)}", file=sys.stderr)
        raise SystemExit(2)


def add_search_options(p: argparse.ArgumentParser, *, seed_program: str, random_seed_default: int,
                       iterations_help: str, structural_default: bool, board_required: bool = False,
                       root: bool = True, root_help: str = "", out_help: str) -> None:
    """The options both searches take, each default shown in ``--help`` (``--profile``, and ``--root`` when
    ``root`` is false, come from the caller: ``arena``'s verbs all take them)."""
    p.add_argument("--board", required=board_required,
                   help=BOARD_HELP + "; its dev items are the fitness" + ("" if board_required else " (default: none)"))
    p.add_argument("--seed-program", default=seed_program,
                   help="the program the search starts from: v1, v5, chunkkv, expected_attention or a file "
                        "(default: %(default)s)")
    p.add_argument("--seed", action=SeedOption, dest="seed_alias", metavar="N", default=None,
                   help="a number: the random seed (same as --random-seed); a name: the old spelling of "
                        "--seed-program (warns)")
    p.add_argument("--random-seed", type=random_seed, default=random_seed_default,
                   help="the run's random seed (0 <= N < 2**31); the run repeats exactly for it (default: %(default)s)")
    p.add_argument("--iterations", type=int, default=None, help=iterations_help)
    p.add_argument("--generations", type=int, dest="generations_alias", action=Deprecated, new="--iterations",
                   default=None, help="old spelling of --iterations: generations x population children (warns)")
    if root:
        p.add_argument("--root", default=None, help=root_help)
    p.add_argument("--arena-root", dest="root", action=Deprecated, new="--root", default=argparse.SUPPRESS,
                   help="old spelling of --root (warns)")
    p.add_argument("--out", default=None, help=out_help)
    ops = p.add_mutually_exclusive_group()
    ops.add_argument("--structural", dest="structural", action="store_true", default=structural_default,
                     help="offline mutator: also the structural operators (product/max of two scorers, sinks, "
                          "question window, pooling, layer shape; docs/structural_operators.md) "
                          f"(default: {'on' if structural_default else 'off'})")
    ops.add_argument("--linear-only", dest="structural", action="store_false",
                     help="offline mutator: only the linear-scorer edits (default: "
                          f"{'off' if structural_default else 'on'})")


def iterations(args: argparse.Namespace, population: int | None, default: int | None) -> int | None:
    """The run's budget: ``--iterations``, else the old ``--generations`` x ``population``, else ``default``."""
    if args.iterations is not None:
        return args.iterations
    if getattr(args, "generations_alias", None) is not None:
        return args.generations_alias * (population or 1)
    return default
