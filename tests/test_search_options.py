"""One vocabulary for the two searches (issue 59, item 3): `cachecraft arena search` and `cachecraft evolve` name the
same things alike, the old spellings still work and warn, `--seed` is a random seed, every default is in --help."""

from __future__ import annotations

import argparse

import pytest

from cachecraft_lib.cli import build_parser
from cachecraft_lib.cli.search_options import DEPRECATED, SHARED, check_board, iterations, seed_program

# What only one of the two searches has (a new option goes here, or into SHARED when both take it).
ONLY_ARENA_SEARCH = {"--engine", "--population", "--islands", "--random-seeds", "--controls", "--preregister", "--round",
                     "--split-seed", "--top", "--select-top", "--notes", "--author", "--ray", "--cpus-per-task",
                     "--max-retries"}
ONLY_EVOLVE = {"--mutator", "--llm-model", "--api-base", "--api-key", "--max-tokens", "--adversarial", "--ratio",
               "--fresh"}


def _sub(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def test_the_two_searches_take_the_same_option_names():
    search, evolve = _options(_sub("arena", "search")), _options(_sub("evolve"))
    assert set(SHARED) <= search and set(SHARED) <= evolve
    assert search - evolve == ONLY_ARENA_SEARCH, "an option of `arena search` that `evolve` lacks (or the reverse)"
    assert evolve - search == ONLY_EVOLVE, "an option of `evolve` that `arena search` lacks (or the reverse)"


@pytest.mark.parametrize("command", [("arena", "search", "--board", "A"), ("evolve",)])
def test_old_spellings_land_on_the_new_options_and_warn(command, capsys):
    parse = build_parser().parse_args
    with pytest.warns(FutureWarning) as caught:
        args = parse([*command, "--generations", "3", "--arena-root", "/tmp/arena"])
    assert {str(w.message).split()[0] for w in caught} == {"--generations", "--arena-root"}
    assert args.root == "/tmp/arena" and iterations(args, 6, None) == 18
    assert capsys.readouterr().err.count("deprecated") == 2
    new = parse([*command, "--iterations", "7", "--root", "/tmp/arena"])
    assert iterations(new, 6, None) == 7 and new.root == "/tmp/arena" and capsys.readouterr().err == ""


@pytest.mark.parametrize("command", [("arena", "search", "--board", "A"), ("evolve",)])
def test_seed_means_a_random_seed_and_a_program_name_is_the_old_spelling(command, capsys):
    parse = build_parser().parse_args
    args = parse([*command, "--seed", "7"])
    assert args.random_seed == 7 and seed_program(args) == parse(list(command)).seed_program
    assert capsys.readouterr().err == ""
    old = parse([*command, "--seed", "v1"])
    with pytest.warns(FutureWarning, match="--seed-program"):
        assert seed_program(old) == "v1"
    assert "--seed is deprecated" in capsys.readouterr().err


def test_select_top_is_the_old_spelling_of_top():
    parse = build_parser().parse_args
    assert parse(["arena", "search", "--board", "A", "--top", "2"]).top == 2
    with pytest.warns(FutureWarning, match="--top"):
        assert parse(["arena", "search", "--board", "A", "--select-top", "3"]).top == 3
    assert set(DEPRECATED) - {"--seed NAME"} <= _options(_sub("arena", "search"))


@pytest.mark.parametrize("path", [("arena", "search"), ("evolve",)])
def test_every_default_shows_in_help(path):
    parser = _sub(*path)
    for action in parser._actions:
        if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings or action.help is None:
            continue
        text = "".join(parser._get_formatter()._format_action(action).split())  # its own help, no wrapping
        if action.nargs == 0:  # a flag: its help says whether it is on or off unless given
            assert "default:on" in text or "default:off" in text, f"{action.option_strings[0]}: on or off?"
            continue
        assert f"default:{action.default}" in text or f"(default{action.default})" in text, \
            f"{action.option_strings[0]}'s default {action.default!r} is not in --help"


def test_boards_come_from_the_board_file(capsys):
    check_board("x", "A", "smoke")  # a prefill board: accepted
    with pytest.raises(SystemExit):
        check_board("x", "C", "smoke")  # board C evicts while decoding: the search does not cover it
    err = capsys.readouterr().err
    assert "B_offline" in err and "C" not in err.split(":")[-1]
