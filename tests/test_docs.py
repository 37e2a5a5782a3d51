"""The user's documents point only at files the repository contains (README, docs/, the package READMEs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "cachecraft_lib").glob("*/README.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _local_links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_in_a_document_resolves_to_a_file_of_the_repository(doc):
    missing = [t for t in _local_links(doc.read_text()) if not (doc.parent / t).exists()]
    assert not missing, f"{doc.relative_to(REPO)} links to files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_document_points_outside_the_repository(doc):
    text = doc.read_text()
    assert "../shared" not in text and "`shared/" not in text and "/work/" not in text


def test_the_readme_links_the_guides_it_moved_out():
    links = set(_local_links((REPO / "README.md").read_text()))
    for doc in ("docs/timings.md", "docs/models.md", "docs/decisions.md", "docs/uncertainty.md",
                "docs/running_on_a_gpu.md", "docs/scaling_out.md", "docs/README.md", "docs/library_files.md",
                "docs/journal/README.md", "docs/journal/history.md", "docs/journal/embedded_model_journal.md"):
        assert doc in links, f"README.md does not link {doc}"


def test_the_link_pattern_finds_relative_links_and_skips_urls():
    text = "see [a](docs/a.md), [b](../b.md#part) and [c](https://x.org/c.md)"
    assert _local_links(text) == ["docs/a.md", "../b.md"]


def test_every_guide_and_diary_is_in_the_docs_index():
    """docs/README.md lists every guide at the top of docs/, docs/journal/README.md every diary."""
    for index, folder in ((REPO / "docs" / "README.md", REPO / "docs"), (REPO / "docs" / "journal" / "README.md",
                                                                          REPO / "docs" / "journal")):
        listed = set(_local_links(index.read_text()))
        missing = [p.name for p in sorted(folder.glob("*.md")) if p != index and p.name not in listed]
        assert not missing, f"{index.relative_to(REPO)} does not link {missing}"


def test_the_docs_start_page_gives_a_reading_order_for_three_readers():
    text = (REPO / "docs" / "README.md").read_text()
    orders = text[text.index("## Reading orders"):text.index("## Every guide")]
    for reader in ("Reproduce the paper", "Submit a method", "Run an arena"):
        assert f"**{reader}" in orders, f"docs/README.md has no reading order for: {reader}"
        part = orders[orders.index(f"**{reader}"):].split("\n**", 1)[0]  # up to the next reader
        steps = re.findall(r"^\d+\. ", part, re.M)
        assert len(steps) >= 3 and len(_local_links(part)) >= 3, f"{reader}: {len(steps)} steps"


def test_the_readme_first_screen_is_what_it_is_the_example_and_the_two_commands():
    """What the project is, the 8-second example with its expected output, then `make test` / `make reproduce` with
    their times, in that order, before anything else; the glossary linked where its terms first appear."""
    text = (REPO / "README.md").read_text()
    first = text.index("```python")
    intro = text[:first]
    assert "docs/glossary.md" in intro and "KV cache" in intro
    expected = text.index("Expected output", first)
    commands = text.index("## Two commands")
    assert first < expected < commands < text.index("## ", text.index("\n", commands + 3))
    block = text[commands:text.index("```\n", text.index("```bash", commands) + 7)]
    assert re.search(r"make test\s+# about \d+ minutes", block) and re.search(r"make reproduce\s+# about \d+ minutes",
                                                                                block)
    assert text.count("\n## ", 0, commands) == 1  # one section (the example) before the two commands


HISTORY = re.compile(r"\bissue \d+|\bred team|\(was |\bno longer\b|\bpreviously\b|\bused to\b", re.I)


@pytest.mark.parametrize("package", ["methods", "models", "ruler"])
def test_module_docstrings_say_what_and_why_not_their_history(package):
    """Histories go to docs/journal/; a docstring describes the code as it is."""
    import ast

    found = []
    for path in sorted((REPO / "cachecraft_lib" / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
        found += [f"{path.name}: {m.group(0)}" for n in nodes for m in HISTORY.finditer(ast.get_docstring(n) or "")]
    assert not found, f"history in docstrings (move it to docs/journal/): {found}"
