"""The command line as a newcomer meets it: --version, help on every option, the API key from the environment,
the renamed --seed-program with the old --seed still accepted (with a warning)."""

from __future__ import annotations

import argparse

import pytest

from cachecraft_lib import __version__
from cachecraft_lib.cli import build_parser, evolve

# Options still without help, all added by cli/arena.py for every arena verb (not this test's files): remove
# an entry when it gets its help, and this test keeps it that way.
WITHOUT_HELP_ELSEWHERE = {"--profile", "folder"}


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, (*path, name))
        else:
            yield path, action


def test_every_option_has_help():
    missing = [(" ".join(path), a.option_strings or a.dest) for path, a in _options(build_parser())
               if not a.help and not (path[:1] == ("arena",) and (a.option_strings or [a.dest])[0]
                                      in WITHOUT_HELP_ELSEWHERE)]
    assert not missing, f"options without help text: {missing}"


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"cachecraft {__version__}"


def test_evolve_reads_the_key_from_the_environment_and_warns_on_a_key_given_inline(capsys):
    parse = build_parser().parse_args
    args = parse(["evolve", "--mutator", "openai"])
    assert evolve.api_key(args, {"OPENAI_API_KEY": "sk-env"}) == "sk-env"
    assert evolve.api_key(args, {}) == evolve.NO_KEY and capsys.readouterr().err == ""
    args = parse(["evolve", "--mutator", "openai", "--api-key", "sk-inline"])
    assert evolve.api_key(args, {"OPENAI_API_KEY": "sk-env"}) == "sk-inline"
    assert "set OPENAI_API_KEY instead" in capsys.readouterr().err


def test_evolve_seed_program_and_its_old_name(capsys):
    parse = build_parser().parse_args
    assert evolve.seed_program(parse(["evolve"])) == "v5"
    assert evolve.seed_program(parse(["evolve", "--seed-program", "v1"])) == "v1"
    assert capsys.readouterr().err == ""
    assert evolve.seed_program(parse(["evolve", "--seed", "chunkkv"])) == "chunkkv"
    assert "--seed is deprecated" in capsys.readouterr().err
