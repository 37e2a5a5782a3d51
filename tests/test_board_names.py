"""Board names come from the board files, not from lists typed in the code (issue 59, item 3)."""

import yaml

from cachecraft_lib.arena.boards.boards import BOARDS_DIR, board_names
from cachecraft_lib.arena.submissions import from_program
from cachecraft_lib.cli import arena, arena_calibrate


def _names_in_files(prefill_only: bool) -> set[str]:
    names = set()
    for path in BOARDS_DIR.glob("*.yaml"):
        for name, spec in yaml.safe_load(path.read_text())["boards"].items():
            if not (prefill_only and spec.get("setting") == "decode_time"):
                names.add(name)
    return names


def test_board_names_are_the_board_files_names():
    assert set(board_names()) == _names_in_files(prefill_only=False)
    assert set(board_names(prefill_only=True)) == _names_in_files(prefill_only=True)
    assert "C" in board_names() and "C" not in board_names(prefill_only=True)


def test_cli_help_lists_every_board_of_the_files():
    for help_text in (arena.BOARD_HELP, arena_calibrate.BOARD_HELP):
        for name in _names_in_files(prefill_only=False):
            assert name in help_text, (name, help_text)


def test_a_program_goes_to_every_prefill_board_by_default(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("def score_tokens(ctx):\n    return ctx.key_norm\n\n\n"
                       "def select_tokens_to_keep(scores, ctx):\n    return None\n")
    out = tmp_path / "folder"
    try:
        from_program.program_to_submission(program, out, "probe")
    except Exception:  # the folder's own checks may refuse this toy program; the metadata is written first
        pass
    metadata = yaml.safe_load((out / from_program.METADATA_FILE).read_text())
    assert set(metadata["boards"]) == _names_in_files(prefill_only=True)
