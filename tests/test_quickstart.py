"""A newcomer's first five minutes: the package's public names, and the README's Python blocks run as written."""

from __future__ import annotations

import importlib
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
