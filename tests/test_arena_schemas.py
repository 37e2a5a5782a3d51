"""One way of checking the arena's structured input (issue 59, item 5): JSON Schema through ``arena.schemas`` for
the board files, a judge's JSON answer and a submission's origin, so a value means the same everywhere (a bool is
no integer, 3.0 no count) and each input's rules are one schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachecraft_lib.arena import schemas
from cachecraft_lib.arena.boards.boards import Board, BoardError, Limits, board_schema, load_boards
from cachecraft_lib.arena.judges import ReviewError
from cachecraft_lib.arena.judges.llm import parse_answer
from cachecraft_lib.arena.submissions.metadata import ORIGIN_SCHEMA, metadata_origin

ANSWER = {"novelty": 1, "effectiveness": 3, "soundness": 2, "flags": [], "prior_work": ["SnapKV"], "notes": "ok"}
BOARD = """profile: smoke
defaults: {lengths: [1024], tasks: [qa_1], limits: {mode: relative, accuracy: 1, efficiency: 0.8}}
boards:
  A: {setting: query_aware, budgets: [0.5], items: {dev: DEV, test: 1}, baselines: [snapkv, no_press],
      weights: {accuracy: 1, memory: 0, speed: 0, overhead: 0}}
"""


def _origin(tmp_path: Path, origin: dict) -> dict | None:
    (tmp_path / "metadata.yaml").write_text(json.dumps({"name": "x", "author": "y", "boards": ["A"],
                                                        "origin": origin}))
    return metadata_origin(tmp_path)


def test_a_bool_is_no_integer_in_any_of_the_three_inputs(tmp_path):
    path = tmp_path / "board.yaml"
    path.write_text(BOARD.replace("DEV", "true"))
    with pytest.raises(BoardError, match="items.dev must be an integer, got True"):
        load_boards("smoke", path)
    with pytest.raises(ReviewError, match="'novelty' must be an integer"):
        parse_answer(json.dumps({**ANSWER, "novelty": True}), "gpt-4o-mini")
    assert _origin(tmp_path, {"kind": "search", "random_seed": True, "rank": False}) == {"kind": "search"}


def test_an_origin_keeps_each_valid_key_and_drops_the_rest(tmp_path):
    origin = {"kind": "search", "run_id": "r" * 300, "random_seed": 2 ** 31, "iterations": 8, "rank": "1",
              "plan_hash": "ab" * 32, "unknown": 1}
    kept = _origin(tmp_path, origin)
    assert kept == {"kind": "search", "run_id": "r" * 200, "iterations": 8, "plan_hash": "ab" * 32}
    assert _origin(tmp_path, {"random_seed": 2 ** 31 - 1}) == {"random_seed": 2 ** 31 - 1}
    assert _origin(tmp_path, {"random_seed": -1}) is None and _origin(tmp_path, "search") is None
    assert set(ORIGIN_SCHEMA["properties"]) >= {"plan", "plan_hash", "random_seed", "registration"}


def test_the_board_schema_is_boards_fields_and_build_types_them(tmp_path):
    schema = board_schema()
    assert set(schema["properties"]) == set(Board.__dataclass_fields__)
    assert set(schema["required"]) == {"name", "profile", "setting", "budgets", "items", "baselines", "weights",
                                       "limits", "lengths", "tasks"}
    assert schema["properties"]["setting"] == {"enum": ["query_aware", "query_agnostic", "decode_time"]}
    path = tmp_path / "board.yaml"
    path.write_text(BOARD.replace("DEV", "2"))
    board = load_boards("smoke", path)["A"]
    assert board.limits == Limits("relative", 1.0, 0.8) and isinstance(board.limits.accuracy, float)
    assert board.budgets == (0.5,) and board.lengths == (1024,) and board.items == {"dev": 2, "test": 1}
    assert schemas.build(tuple[float, ...], [1, 2]) == (1.0, 2.0)
    assert schemas.first_error({"type": "number"}, 3) is None and schemas.first_error({"type": "number"}, True)
