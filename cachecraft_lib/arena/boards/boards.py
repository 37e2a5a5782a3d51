"""The arena's boards as data: one YAML file per profile (``arena/boards/<profile>.yaml``), checked on load.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BOARDS_DIR = Path(__file__).parent
SETTINGS = ("query_aware", "query_agnostic", "decode_time")
WEIGHT_KEYS = ("accuracy", "memory", "speed", "overhead")
OPTIONAL_WEIGHTS = ("generated_length",)
BENCHMARKS = ("ruler", "math500")
MIN_CAP = 16
LIMIT_MODES = ("absolute", "relative")
MEMORY_BASES = ("logical", "physical")
OPTIONAL_HOOKS = ("whole_cache",)  # hooks a board's rules may allow (``hooks_allowed``); the others run everywhere


class BoardError(ValueError):
    """Board data that cannot be used; the message names the file, the board and what to fix."""


@dataclass(frozen=True)
class Limits:
    """Eligibility: ``absolute`` (accuracy >= a, memory + speed >= e) or ``relative`` (fractions of the best
    baseline's accuracy and memory + speed on the same board)."""

    mode: str
    accuracy: float
    efficiency: float


@dataclass(frozen=True)
class Board:
    name: str
    profile: str
    setting: str
    description: str
    budgets: tuple[float, ...]
    items: dict[str, int]
    questions_per_context: int
    baselines: tuple[str, ...]
    weights: dict[str, float]
    limits: Limits
    lengths: tuple[int, ...]
    tasks: tuple[str, ...]
    full_cache_floor: float
    accuracy_cap: float
    memory_basis: str
    gain_to_resolve: float
    gate_threshold: float
    rules_version: int
    label: str
    overhead_allowance: float | None = None
    extra_benchmarks: tuple[dict[str, Any], ...] = ()
    calibration: dict[str, Any] = field(default_factory=dict)
    benchmark: str = "ruler"
    chunk: int = 128
    slack: int = 0
    max_new_tokens: int | None = None
    model: str | None = None
    hooks_allowed: tuple[str, ...] = ()  # optional hooks the rules allow here (``whole_cache``: B_offline)

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
    merged = {**defaults, **spec}

    def need(key: str) -> Any:
        if key not in merged:
            raise BoardError(f"{where}: missing field {key!r}")
        return merged[key]

    setting = need("setting")
    if setting not in SETTINGS:
        raise BoardError(f"{where}: setting must be one of {SETTINGS}, got {setting!r}")
    budgets = tuple(float(b) for b in need("budgets"))
    if setting == "decode_time":
        if not budgets or len(set(budgets)) != len(budgets) or any(
                not (0 < b < 1 or (b >= MIN_CAP and b == int(b))) for b in budgets):
            raise BoardError(f"{where}: decode-time budgets are distinct caps: fractions of the context in (0, 1) or "
                             f"whole entry counts >= {MIN_CAP}; got {budgets}")
    elif not budgets or any(not 0 < b <= 1 for b in budgets) or len(set(budgets)) != len(budgets):
        raise BoardError(f"{where}: budgets must be distinct fractions of the cache kept, in (0, 1]; got {budgets}")
    items = dict(need("items"))
    if set(items) != {"dev", "test"} or any(not isinstance(v, int) or v < 1 for v in items.values()):
        raise BoardError(f"{where}: items must give positive integers for 'dev' and 'test' (per task); got {items}")
    weights = {k: float(v) for k, v in dict(need("weights")).items()}
    if not set(WEIGHT_KEYS) <= set(weights) <= set(WEIGHT_KEYS + OPTIONAL_WEIGHTS) \
            or any(v < 0 or math.isnan(v) for v in weights.values()):
        raise BoardError(f"{where}: weights need exactly {WEIGHT_KEYS} (optionally {OPTIONAL_WEIGHTS}), each >= 0; "
                         f"got {weights}")
    if "generated_length" in weights and setting != "decode_time":
        raise BoardError(f"{where}: the generated_length weight is for decode-time boards (C) only")
    weights.setdefault("generated_length", 0.0)
    benchmark = str(merged.get("benchmark", "ruler"))
    if benchmark not in BENCHMARKS:
        raise BoardError(f"{where}: benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
    limits = dict(need("limits"))
    if limits.get("mode") not in LIMIT_MODES or not {"accuracy", "efficiency"} <= set(limits):
        raise BoardError(f"{where}: limits need mode ({'|'.join(LIMIT_MODES)}), accuracy and efficiency; got {limits}")
    basis = merged.get("memory_basis", "logical")
    if basis not in MEMORY_BASES:
        raise BoardError(f"{where}: memory_basis must be one of {MEMORY_BASES}, got {basis!r}")
    baselines = tuple(need("baselines"))
    _check_baselines(where, baselines, setting)
    allowance = merged.get("overhead_allowance")
    if allowance is not None and float(allowance) < 0:
        raise BoardError(f"{where}: overhead_allowance must be >= 0 (x prefill), got {allowance}")
    hooks_allowed = tuple(merged.get("hooks_allowed") or ())
    if not set(hooks_allowed) <= set(OPTIONAL_HOOKS) or (hooks_allowed and setting == "decode_time"):
        raise BoardError(f"{where}: hooks_allowed may name {OPTIONAL_HOOKS} on a prefill board; got {hooks_allowed}")
    questions = int(merged.get("questions_per_context", 1))
    if questions < 1 or (setting == "query_aware" and questions != 1):
        raise BoardError(f"{where}: questions_per_context must be >= 1, and 1 on a query-aware board (the question "
                         f"is compressed with its context); got {questions}")
    return Board(name=name, profile=str(data.get("profile", path.stem)), setting=setting,
                 description=str(merged.get("description", "")), budgets=budgets, items=items,
                 questions_per_context=questions, baselines=baselines, weights=weights,
                 limits=Limits(limits["mode"], float(limits["accuracy"]), float(limits["efficiency"])),
                 lengths=tuple(int(x) for x in need("lengths")), tasks=tuple(need("tasks")),
                 full_cache_floor=float(merged.get("full_cache_floor", 25)),
                 accuracy_cap=float(merged.get("accuracy_cap", 1.1)), memory_basis=basis,
                 gain_to_resolve=float(merged.get("gain_to_resolve", 0.02)),
                 gate_threshold=float(merged.get("gate_threshold", 0.0)),
                 rules_version=int(data.get("rules_version", 1)), label=str(data.get("label", "")),
                 overhead_allowance=None if allowance is None else float(allowance),
                 extra_benchmarks=tuple(merged.get("extra_benchmarks") or ()),
                 calibration=dict(merged.get("calibration") or {}), benchmark=benchmark,
                 chunk=int(merged.get("chunk", 128)), slack=int(merged.get("slack", 0)),
                 max_new_tokens=None if merged.get("max_new_tokens") is None else int(merged["max_new_tokens"]),
                 model=merged.get("model"), hooks_allowed=hooks_allowed)


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
