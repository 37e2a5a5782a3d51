"""The Python the project declares is the Python its tests run on: pyproject's ``requires-python``, the conda
environment's ``python=``, ruff's target and the README's install line name one lowest version, and the
interpreter running these tests satisfies it (the code uses 3.11's stdlib: ``datetime.UTC``, ``tomllib``)."""

from __future__ import annotations

import re
import sys
import tomllib

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cachecraft_lib.paths import REPO


def _declared() -> tuple[SpecifierSet, Version]:
    """The specifier and its lowest version (the one ``>=`` clause)."""
    spec = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    lows = [Version(s.version) for s in spec if s.operator == ">="]
    assert len(lows) == 1, f"requires-python should name one lowest version with >=, got {spec}"
    return spec, lows[0]


def _conda_python() -> str:
    deps = yaml.safe_load((REPO / "environment.yml").read_text())["dependencies"]
    pins = [d.split("=", 1)[1] for d in deps if isinstance(d, str) and re.match(r"python\s*=", d)]
    assert len(pins) == 1, f"environment.yml should pin python once, got {pins}"
    return pins[0].strip()


def test_the_running_interpreter_satisfies_the_declaration():
    spec, _ = _declared()
    running = ".".join(map(str, sys.version_info[:3]))
    assert spec.contains(running), f"Python {running} runs the tests but pyproject declares {spec}"


def test_conda_ruff_and_readme_name_the_declared_lowest_python():
    _, low = _declared()
    lowest = f"{low.major}.{low.minor}"
    assert _conda_python() == lowest, f"environment.yml pins python={_conda_python()}, pyproject says >={lowest}"
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["target-version"]
    assert target == f"py{low.major}{low.minor}", f"ruff targets {target}, pyproject says >={lowest}"
    assert f"{lowest} or newer" in (REPO / "README.md").read_text(), f"the README should say '{lowest} or newer'"
