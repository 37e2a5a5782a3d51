"""``safe_files``: the check before the arena reads a submission's file (the judges' bundle and the site)."""

from __future__ import annotations

import os

from cachecraft_lib.arena.submissions import safe_files


def test_only_plain_files_inside_the_folder_are_read(tmp_path):
    folder, arena = tmp_path / "sub", tmp_path / "arena"
    (arena / "private").mkdir(parents=True)
    (arena / "ledger.jsonl").write_text("")
    secret = arena / "private" / "organiser.log"
    secret.write_text("HIDDEN")
    folder.mkdir()
    (folder / "DESCRIPTION.md").write_text("# Idea\n")
    assert safe_files.read_text(folder / "DESCRIPTION.md", folder) == "# Idea\n"
    assert safe_files.read_text(folder / "absent.md", folder) is None and safe_files.problem(folder / "absent.md",
                                                                                              folder) is None
    (folder / "inner.md").symlink_to("DESCRIPTION.md")  # a link, even one pointing inside
    (folder / "out.md").symlink_to(secret)
    (folder / "sub").symlink_to(folder)  # a linked folder on the way
    (folder / "big.md").write_bytes(b"x" * (safe_files.MAX_TEXT_BYTES + 1))
    os.mkfifo(folder / "pipe.md")
    (folder / "twin.md").hardlink_to(secret)  # another name for a file outside the folder
    for name in ("inner.md", "out.md", "sub/DESCRIPTION.md", "big.md", "pipe.md", "twin.md"):
        assert safe_files.problem(folder / name, folder) is not None, name
        assert safe_files.read_text(folder / name, folder) is None, name
    assert "private" in safe_files.problem(secret, arena)  # an arena's private folder, even when the folder holds it
    assert "limit" in safe_files.problem(folder / "DESCRIPTION.md", folder, cap=3)  # the cap is a parameter
