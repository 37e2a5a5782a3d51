"""The library's maps (the README's packages; docs/library_files.md's every file), each docstring's opening sentence."""

from __future__ import annotations

import importlib.util

from cachecraft_lib.paths import REPO


def _tool():
    spec = importlib.util.spec_from_file_location("library_map", REPO / "scripts" / "library_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_maps_are_the_library_as_it_stands():
    tool = _tool()
    assert tool.readme_block(tool.README.read_text()) == tool.library_map(files=False), \
        "the README's library map is stale: run `python scripts/library_map.py --write`"
    files = tool.readme_block(tool.FILES_DOC.read_text(), (tool.FILES_OPEN, tool.FILES_CLOSE))
    assert files == tool.library_map(), \
        "docs/library_files.md (every file) is stale: run `python scripts/library_map.py --write`"


def test_write_rewrites_both_maps(tmp_path):
    tool = _tool()
    readme, files_doc = tmp_path / "README.md", tmp_path / "library_files.md"
    readme.write_text(f"intro\n{tool.OPEN}\n```\nold\n```\n{tool.CLOSE}\nafter\n")
    files_doc.write_text(f"# files\n{tool.FILES_OPEN}\nold\n{tool.FILES_CLOSE}\n")
    tool.write(readme, files_doc)
    assert tool.readme_block(readme.read_text()) == tool.library_map(files=False)
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("after\n")
    assert tool.readme_block(files_doc.read_text(), (tool.FILES_OPEN, tool.FILES_CLOSE)) == tool.library_map()


def test_every_module_is_on_the_map_with_its_job():
    tool = _tool()
    text = tool.library_map()
    for path in (REPO / "cachecraft_lib").rglob("*.py"):
        if path.name == "__init__.py" or "__pycache__" in path.parts or "examples" in path.parts:
            continue
        assert f" {path.name} " in text or text.endswith(path.name), f"{path} is missing from the map"
        assert tool.first_sentence(path), f"{path} has no docstring saying what it is for"
