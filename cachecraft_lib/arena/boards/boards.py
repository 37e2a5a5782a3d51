"""The arena's boards as data: one YAML file per profile (``arena/boards/<profile>.yaml``), checked on load.

The check has two parts: the board's mapping against ``Board``'s JSON schema (``arena.schemas``: the one
validator of the arena's structured input; a missing or unknown field, a wrong type, a value outside a
``Literal`` is named with the file, the board and what the field must be), then ``_check`` says what types
cannot (ranges, distinct budgets, the rules between fields).

Why data: budgets, weights, limits and item counts are the rules of the game; they are read by the harness,
the scorer, the README and the notebook from one place, and ``arena calibrate`` rewrites the budgets of the
embedded profiles from measurements instead of anyone editing code.

A board: ``setting`` (``query_aware`` = board A, the question inside the compressed context;
``query_agnostic`` = boards B, the context compressed alone, several questions per context), ``budgets``
(fractions of the context's KV entries *kept*), items per task for the dev and test splits, the baselines,
the score's weights, the eligibility limits and, on B_offline, the overhead allowance (x prefill) and
``hooks_allowed: [whole_cache]`` (a slow one-off compression that sees every layer first,
``arena.submissions.whole_cache``).

``decode_time`` (board C) evicts while the model runs: its ``budgets`` are per-layer caps on the KV cache,
either fractions of each context's tokens (embedded: the context streamed under the cap, then the questions)
or absolute entry counts (paper: 2048 / 4096 while a reasoning model decodes). Its extra fields: the
``benchmark`` (``ruler`` or ``math500``), ``chunk`` (tokens per forward when feeding), ``slack`` (entries
evicted beyond need, so a method runs once per ``slack`` steps), ``max_new_tokens``, ``model`` (a hub id;
default: the profile's), and the optional weight ``generated_length`` (``G``: generated length against the
full cache's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

BOARDS_DIR = Path(__file__).parent
Setting = Literal["query_aware", "query_agnostic", "decode_time"]
Benchmark = Literal["ruler", "math500"]
LimitMode = Literal["absolute", "relative"]
MemoryBasis = Literal["logical", "physical"]
Hook = Literal["whole_cache"]  # hooks a board's rules may allow (``hooks_allowed``); the others run everywhere
SETTINGS, BENCHMARKS, LIMIT_MODES = get_args(Setting), get_args(Benchmark), get_args(LimitMode)
MEMORY_BASES, OPTIONAL_HOOKS = get_args(MemoryBasis), get_args(Hook)
WEIGHT_KEYS = ("accuracy", "memory", "speed", "overhead")
OPTIONAL_WEIGHTS = ("generated_length",)
MIN_CAP = 16


class BoardError(ValueError):
    """Board data that cannot be used; the message names the file, the board and what to fix."""


@dataclass(frozen=True)
class Limits:
    """Eligibility: ``absolute`` (accuracy >= a, memory + speed >= e) or ``relative`` (fractions of the best
    baseline's accuracy and memory + speed on the same board)."""

    mode: LimitMode
    accuracy: float
    efficiency: float


@dataclass(frozen=True)
class Board:
    """One board, as its YAML fields say (defaults merged) plus its name and its file's profile, rules and label;
    the fields with a default may be left out of the file."""

    name: str
    profile: str
    setting: Setting
    budgets: tuple[float, ...]
    items: dict[str, int]
    baselines: tuple[str, ...]
    weights: dict[str, float]
    limits: Limits
    lengths: tuple[int, ...]
    tasks: tuple[str, ...]
    rules_version: int = 1
    label: str = ""
    description: str = ""
    questions_per_context: int = 1
    full_cache_floor: float = 25.0
    accuracy_cap: float = 1.1
    memory_basis: MemoryBasis = "logical"
    gain_to_resolve: float = 0.02
    gate_threshold: float = 0.0
    overhead_allowance: float | None = None
    extra_benchmarks: tuple[dict[str, Any], ...] = ()
    calibration: dict[str, Any] = field(default_factory=dict)
    benchmark: Benchmark = "ruler"
    chunk: int = 128
    slack: int = 0
    max_new_tokens: int | None = None
    model: str | None = None
    hooks_allowed: tuple[Hook, ...] = ()  # optional hooks the rules allow here (``whole_cache``: B_offline)

    @property
    def allows_whole_cache(self) -> bool:
        """The rules allow a slow one-off compression: the whole-cache hook runs here
        (``arena.submissions.whole_cache``)."""
        return "whole_cache" in self.hooks_allowed

    @property
    def query_aware(self) -> bool:
        return self.setting == "query_aware"

    @property
    def decode_time(self) -> bool:
        """Board C: eviction while the model runs, under a hard per-layer cap."""
        return self.setting == "decode_time"

    def cap_for(self, budget: float, context_tokens: int) -> int:
        """The per-layer cap of a decode-time budget: a fraction of the context's tokens, or an entry count."""
        return int(budget) if budget >= 1 else max(MIN_CAP, int(round(budget * context_tokens)))

    @property
    def ratios(self) -> tuple[float, ...]:
        """KVPress compression ratios of the budgets (fraction evicted)."""
        return tuple(round(1.0 - b, 6) for b in self.budgets)


def board_file(profile: str) -> Path:
    return BOARDS_DIR / f"{profile}.yaml"


def board_names(prefill_only: bool = False) -> tuple[str, ...]:
    """Every board name of every profile's board file, in file order (the CLI's help and a program's default
    boards come from here, not from a list typed in the code); ``prefill_only`` drops decode-time boards."""
    names: dict[str, None] = {}
    for path in sorted(BOARDS_DIR.glob("*.yaml")):
        for name, board in load_boards(path.stem).items():
            if not (prefill_only and board.decode_time):
                names.setdefault(name, None)
    return tuple(names)


def board_help() -> str:
    """The CLI's --board help: the names from the board files (a board added there shows here)."""
    return f"board name ({', '.join(board_names())})"


def whole_cache_boards() -> frozenset[str]:
    """Names of the boards whose rules allow the whole-cache hook, in any profile (a folder's check knows no
    profile; today B_offline in every one)."""
    return frozenset(name for p in BOARDS_DIR.glob("*.yaml") for name, b in load_boards(p.stem).items()
                     if b.allows_whole_cache)


def load_boards(profile: str, path: str | Path | None = None) -> dict[str, Board]:
    """Every board of ``profile`` (or of the YAML file ``path``), validated."""
    path = Path(path) if path else board_file(profile)
    if not path.exists():
        known = sorted(p.stem for p in BOARDS_DIR.glob("*.yaml"))
        raise BoardError(f"no board data for profile {profile!r} ({path}); profiles with boards: {known}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise BoardError(f"{path}: not valid YAML ({err}); fix the file or restore it from git") from err
    if not isinstance(data, dict) or not isinstance(data.get("boards"), dict) or not data["boards"]:
        raise BoardError(f"{path}: expected a mapping with a non-empty 'boards' section")
    defaults = data.get("defaults") or {}
    return {name: _board(path, data, defaults, name, spec) for name, spec in data["boards"].items()}


def load_board(profile: str, name: str, path: str | Path | None = None) -> Board:
    """One board; an unknown name is an error listing the profile's boards."""
    boards = load_boards(profile, path)
    if name not in boards:
        raise BoardError(f"unknown board {name!r} for profile {profile!r}; boards: {', '.join(boards)}")
    return boards[name]


def _board(path: Path, data: dict, defaults: dict, name: str, spec: Any) -> Board:
    where = f"{path.name}, board {name}"
    if not isinstance(spec, dict):
        raise BoardError(f"{where}: expected a mapping of fields")
    file_fields = {"name": name, "profile": str(data.get("profile", path.stem)), "rules_version":
                   data.get("rules_version", 1), "label": str(data.get("label", ""))}
    merged = {k: v for k, v in {**defaults, **spec}.items() if v is not None}  # null: the field's default
    from .. import schemas

    values = {**merged, **file_fields}
    err = schemas.first_error(board_schema(), values)
    if err is not None:
        raise BoardError(f"{where}: {_schema_text(err)}")
    board = schemas.build(Board, values)  # lists as tuples, an int where a float is due widened
    _check(where, board)
    weights = dict(board.weights)
    weights.setdefault("generated_length", 0.0)  # after the others, as the rules events have always listed it
    return replace(board, weights=weights)


def board_schema() -> dict[str, Any]:
    """A board's JSON schema, from ``Board``'s fields (``schemas.schema_of``)."""
    from .. import schemas

    return schemas.schema_of(Board)


def _schema_text(err: Any) -> str:
    """What the schema check found, said as a fix: the field, what it must be, what the file has."""
    from .. import schemas

    if err.validator == "required":
        return f"missing field {err.message.split(chr(39))[1]!r}"
    if err.validator == "additionalProperties" and not err.absolute_path:
        known = sorted(f for f in Board.__dataclass_fields__ if f not in ("name", "profile", "rules_version", "label"))
        extra = sorted(set(err.instance) - set(Board.__dataclass_fields__))
        return f"unknown field(s) {extra}; the fields a board may have: {known}"
    return f"{schemas.path_of(err) or 'the board'} must be {schemas.expected(err.schema)}, got {err.instance!r}"


def _check(where: str, board: Board) -> None:
    """What types cannot say: ranges, distinct budgets, the weights' keys, the rules between fields."""
    budgets, setting = board.budgets, board.setting
    if setting == "decode_time":
        if not budgets or len(set(budgets)) != len(budgets) or any(
                not (0 < b < 1 or (b >= MIN_CAP and b == int(b))) for b in budgets):
            raise BoardError(f"{where}: decode-time budgets are distinct caps: fractions of the context in (0, 1) or "
                             f"whole entry counts >= {MIN_CAP}; got {budgets}")
    elif not budgets or any(not 0 < b <= 1 for b in budgets) or len(set(budgets)) != len(budgets):
        raise BoardError(f"{where}: budgets must be distinct fractions of the cache kept, in (0, 1]; got {budgets}")
    items = board.items
    if set(items) != {"dev", "test"} or any(v < 1 for v in items.values()):
        raise BoardError(f"{where}: items must give positive integers for 'dev' and 'test' (per task); got {items}")
    weights = board.weights
    if not set(WEIGHT_KEYS) <= set(weights) <= set(WEIGHT_KEYS + OPTIONAL_WEIGHTS) \
            or any(v < 0 or math.isnan(v) for v in weights.values()):
        raise BoardError(f"{where}: weights need exactly {WEIGHT_KEYS} (optionally {OPTIONAL_WEIGHTS}), each >= 0; "
                         f"got {weights}")
    if "generated_length" in weights and setting != "decode_time":
        raise BoardError(f"{where}: the generated_length weight is for decode-time boards (C) only")
    _check_baselines(where, board.baselines, setting)
    if board.overhead_allowance is not None and board.overhead_allowance < 0:
        raise BoardError(f"{where}: overhead_allowance must be >= 0 (x prefill), got {board.overhead_allowance}")
    if board.hooks_allowed and setting == "decode_time":
        raise BoardError(f"{where}: hooks_allowed may name {OPTIONAL_HOOKS} on a prefill board; got "
                         f"{board.hooks_allowed}")
    questions = board.questions_per_context
    if questions < 1 or (setting == "query_aware" and questions != 1):
        raise BoardError(f"{where}: questions_per_context must be >= 1, and 1 on a query-aware board (the question "
                         f"is compressed with its context); got {questions}")


def _check_baselines(where: str, baselines: tuple[str, ...], setting: str = "query_aware") -> None:
    from ...methods.registry import NO_PRESS, arena_baselines

    known = arena_baselines(decode_time=setting == "decode_time")
    unknown = [b for b in baselines if b not in known]
    if unknown:
        hint = f" (the full cache is called {NO_PRESS!r})" if "full" in unknown else ""
        raise BoardError(f"{where}: unknown baseline(s) {unknown}{hint}; known: {sorted(known)}")
    if NO_PRESS not in baselines:
        raise BoardError(f"{where}: the baselines must include {NO_PRESS!r} (scores are normalised to the full cache)")


def boards_table(boards: dict[str, Board]):
    """The boards as a table (one row per board): what the notebook and README show."""
    import pandas as pd

    rows = [{"board": b.name, "setting": b.setting, "kept (budgets)": _budgets_text(b),
             "lengths": ", ".join(map(str, b.lengths)), "tasks": len(b.tasks),
             "dev/test items per task": f"{b.items['dev']}/{b.items['test']}",
             "questions per context": b.questions_per_context, "baselines": ", ".join(b.baselines),
             "weights (acc/mem/speed/overhead[/G])": "/".join(f"{b.weights[k]:g}" for k in WEIGHT_KEYS)
             + (f"/{b.weights['generated_length']:g}" if b.decode_time else ""),
             "limits": f"{b.limits.mode}: acc >= {b.limits.accuracy:g}, mem+speed >= {b.limits.efficiency:g}",
             "overhead allowance": "-" if b.overhead_allowance is None else f"{b.overhead_allowance:g}x prefill"}
            for b in boards.values()]
    return pd.DataFrame(rows)


def _budgets_text(b: Board) -> str:
    if not b.decode_time:
        return ", ".join(f"{x:.0%}" for x in b.budgets)
    caps = ", ".join(f"{x:.0%} of the context" if x < 1 else f"{int(x)} entries" for x in b.budgets)
    return f"caps per layer: {caps}"


def write_budgets(profile: str, board_budgets: dict[str, tuple[float, ...]], calibration: dict[str, dict],
                  path: str | Path | None = None) -> Path:
    """Rewrite the budgets (and the measurements behind them) of some boards in the profile's YAML file.

    The file is re-read and re-validated after writing; on a validation error the old text is restored.
    """
    path = Path(path) if path else board_file(profile)
    old = path.read_text()
    data = yaml.safe_load(old)
    for name, budgets in board_budgets.items():
        if name not in data["boards"]:
            raise BoardError(f"{path.name}: no board {name!r} to calibrate")
        data["boards"][name]["budgets"] = [round(float(b), 4) for b in budgets]
        data["boards"][name]["calibration"] = calibration.get(name, {})
    header = "".join(line + "\n" for line in old.splitlines() if line.startswith("#"))
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120))
    try:
        load_boards(profile, path)
    except BoardError:
        path.write_text(old)
        raise
    return path
