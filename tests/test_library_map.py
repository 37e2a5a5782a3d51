"""The library's maps in the README (its packages; every file, folded) with each docstring's opening sentence."""

from __future__ import annotations

import importlib.util

from cachecraft_lib.paths import REPO


def _tool():
    spec = importlib.util.spec_from_file_location("library_map", REPO / "scripts" / "library_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_map_is_the_library_as_it_stands():
    tool = _tool()
    assert tool.readme_block((REPO / "README.md").read_text()) == tool.library_map(files=False), \
        "the README's library map is stale: run `python scripts/library_map.py --write`"
    files = tool.readme_block((REPO / "README.md").read_text(), (tool.FILES_OPEN, tool.FILES_CLOSE))
    assert files == tool.library_map(), "the README's map of every file is stale: run `python scripts/library_map.py --write`"


def test_every_module_is_on_the_map_with_its_job():
    tool = _tool()
    text = tool.library_map()
    for path in (REPO / "cachecraft_lib").rglob("*.py"):
        if path.name == "__init__.py" or "__pycache__" in path.parts or "examples" in path.parts:
            continue
        assert f" {path.name} " in text or text.endswith(path.name), f"{path} is missing from the map"
        assert tool.first_sentence(path), f"{path} has no docstring saying what it is for"
