"""A newcomer's first five minutes: the package's public names, and the README's Python blocks run as written."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

import cachecraft_lib
from cachecraft_lib.paths import REPO


def test_importing_the_package_loads_neither_torch_nor_kvpress():
    code = "import sys, cachecraft_lib; print(sorted({'torch', 'kvpress'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", f"`import cachecraft_lib` loaded {out.stdout.strip()}"


@pytest.mark.parametrize("name", sorted(cachecraft_lib._EXPORTS))
def test_every_public_name_is_the_object_its_module_defines(name):
    module = importlib.import_module(cachecraft_lib._EXPORTS[name])
    assert getattr(cachecraft_lib, name) is getattr(module, name)
    assert name in cachecraft_lib.__all__ and name in dir(cachecraft_lib)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'FRCPresss'"):
        cachecraft_lib.FRCPresss  # noqa: B018


def _blocks(language: str, section: str = "") -> list[str]:
    """The README's fenced blocks of one language, in order (only those under the heading ``section``)."""
    text = (REPO / "README.md").read_text()
    if section:
        text = text[text.index(f"\n## {section}"):]
        text = text[:text.find("\n## ", 4) % (len(text) + 1)]
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.slow
def test_the_readme_python_blocks_run_as_written(capsys):
    """Every Python block of the README, in order in one namespace, as a newcomer pastes them; the first prints
    exactly the README's expected output, and the claims the README makes about it hold (the stand-in finds the
    needle at r = 0.5)."""
    blocks = _blocks("python")
    assert len(blocks) >= 2, "the README's quick start has lost its Python blocks"
    namespace: dict = {"__name__": "__readme__"}
    printed = []
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)  # noqa: S102 (our README)
        printed.append(capsys.readouterr().out)
    assert printed[0].strip() == _blocks("text")[0].strip(), "the README's expected output is not what it prints"
    out = "".join(printed)
    needle = namespace["sample"].answer[0]
    half = next(line for line in out.splitlines() if line.startswith("r = 0.5:"))
    answer = half.removeprefix("r = 0.5:").rsplit(", expected", 1)[0]  # the line also prints the needle
    assert needle in answer, f"the README says the stand-in finds the needle at r = 0.5: {half}"
    assert "r = 0.88:" in out and "ChunkPress" in out and "AdaKVPress" in out


def test_the_readme_arena_check_runs_as_written(capsys):
    """The quick start's `cachecraft arena check` line (the dev run after it is the arena's own tests' job)."""
    from cachecraft_lib.cli import main

    lines = [line.split() for block in _blocks("bash", "Quick start") for line in block.splitlines()
             if line.startswith("cachecraft arena check ")]
    assert lines, "the README's quick start has no `cachecraft arena check` line"
    for argv in lines:
        assert main(argv[1:]) == 0
    assert "ok: frc" in capsys.readouterr().out
