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
