"""The arena's verbs as functions: dev, baselines, submit, reveal (the CLI and notebook 07 call these).

- ``dev``: a method on the public dev items beside the board's baselines (cached), with the paired interval of
  its gain over the best baseline. Unlimited.
- ``record_baselines``: the baselines on the hidden test items of a round, recorded in the ledger (once).
- ``submit``: check the secret against the round's commitment, the rate limit (normalised author), the
  folder (reserved names), run on the test items, score, gate against the board's best (paired bootstrap over
  test units, seed in the ledger), points, ledger. A bad submission is recorded as a ``rejection`` with its
  kind and author (``refusals``: on test items without the method's text); nothing else changes.
- ``reveal``: check the round's salted commitment against the secret and show the test seeds.

Every evaluation of any program on a round's test items is a ``test_look`` ledger event (author, program hash
and its normalised digests ``program_ast`` and ``program_shape`` (``look_digests``), what it keeps on the round's
test contexts ``program_behaviour`` and ``program_sketch``, keyed (``scoring.behaviour``), board, round; for a
search's entry also its origin's ``plan``/``plan_hash``, ``run_id`` and ``random_seed``), recorded before it
runs: the leaderboard counts them per author and per pre-registered plan (``scoring.plan_looks``: every look
at an entry's program counts against its claim, whatever its tag or author). ``dev`` and ``submit`` return
dataclasses (``results.DevReport``, ``results.Entry``/``results.Rejection``) that also read like the dicts
they replace. ``submit`` reads (and verifies) the ledger once before running and once under the lock at
recording (``recording.record_submission``); the ledger verifies only lines it has not seen.

Per-unit test values stay outside the ledger, under ``<root>/private/round<r>/<board>/<entry id>.parquet``
(``baseline-<name>`` or ``entry-<ledger seq>``, an entry's own file, never overwritten); the gate reads the
board's best entry's values from there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..methods.registry import NO_PRESS
from ..paths import results_dir
from ..profiles import PROFILES, board_data_profile, get_profile
from ..sandbox import BoundaryUnavailable, plan
from ..sandbox import boundary as os_boundary
from .board_runner import BoardRunner, Contender, baseline_contender, submission_contender
from .boards.boards import Board, load_boards
from .boards.items import board_items
from .recording import (
    best_entry,
    entry_payload,
    paired_record,
    payload,
    private_path,
    record_submission,
    save_units,
)
from .results import DevReport, Entry, Rejection
from .row_cache import RowCache, RowKey, code_fingerprint, items_digest, model_fingerprint
from .scoring import score
from .scoring.code_shape import checked_digests
from .scoring.events import Kind
from .scoring.rounds import Round, open_round, recorded
from .submission_fields import LOOK_ORIGIN, check_identity, entry_extra, look_origin  # noqa: F401 - re-exported


@dataclass
class Arena:
    """One profile's arena: its boards, model, results folder and ledger (``<root>/ledger.jsonl``)."""

    profile: str = "cpu"
    root: Path | None = None
    progress: bool = True
    weak_secret_ok: bool = False  # --weak-secret-ok: a typed secret below the estimate (the round records it)
    rows_root: Path | None = None  # where the baselines' rows are kept (``row_cache``); None: ``root``
    boards: dict[str, Board] = field(init=False)
    _loaded: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    _loaded_name: str | None = field(default=None, init=False, repr=False)
    _ledger: Any = field(default=None, init=False, repr=False)
    _probes: dict = field(default_factory=dict, init=False, repr=False)  # behaviour's inputs per board, round, model

    def __post_init__(self) -> None:
        self.boards = load_boards(board_data_profile(self.profile))  # the gpu stand-in: smoke boards
        self.root = Path(self.root) if self.root else results_dir("arena", self.profile)
        self.settings = get_profile(self.profile) if self.profile in PROFILES else None
        self.rows = RowCache(Path(self.rows_root) if self.rows_root else self.root)

    # ------------------------------------------------------------------------------------ plumbing
    def board(self, name: str) -> Board:
        from .boards.boards import BoardError

        if name not in self.boards:
            raise BoardError(f"unknown board {name!r} for profile {self.profile!r}; boards: {', '.join(self.boards)}")
        return self.boards[name]

    @property
    def ledger(self):
        """The arena's ledger, one object (it keeps its verified prefix: each read checks only new lines)."""
        from .scoring.ledger import Ledger

        path = Path(self.root) / "ledger.jsonl"
        if self._ledger is None or self._ledger.path != path:
            self._ledger = Ledger(path)
        return self._ledger

    def model(self, board: Board | None = None) -> tuple[Any, Any]:
        """The profile's model, or the board's own (board C names a reasoning model on the paper profile)."""
        from ..models.loading import load_model

        name, device, dtype = self._model_spec(board)
        if self._loaded is None or self._loaded_name != name:
            self._loaded = load_model(name, device=device, dtype=dtype)
            self._loaded_name = name
        return self._loaded

    def _model_spec(self, board: Board | None = None) -> tuple[str, str | None, str]:
        """(model, device, dtype) as ``model`` loads it: the board's own model, else the profile's."""
        p = self.settings
        name = getattr(board, "model", None) or (p.models[0] if p else "tiny")
        return (name, p.device if p else "cpu", p.dtype if p else "float32")

    def _source(self) -> str:
        return self.settings.ruler_source if self.settings and self.settings.ruler_source != "hf" else "auto"

    def items(self, board: Board, split: str, secret: bytes | Round | None = None, round_: int = 1) -> pd.DataFrame:
        """The board's items of a split (the test split's from a ``Round``, or a secret and round number: the
        items follow from them, nothing is checked here); MATH-500 (paper board C) raises
        ``math500.NotMeasurable`` offline, before any model is loaded."""
        if isinstance(secret, Round):
            secret, round_ = secret.secret, secret.number
        if board.benchmark == "math500":
            from .boards.math500 import math_items

            return math_items(board, split, secret, round_)
        items = board_items(board, split, self.model(board)[1], secret, round_, source=self._source())
        if board.max_new_tokens is not None:  # board C bounds the answers it decodes under the cap
            items["max_new_tokens"] = items["max_new_tokens"].clip(upper=board.max_new_tokens)
        return items

    def run(self, board: Board, items: pd.DataFrame, contenders: list[Contender]) -> pd.DataFrame:
        model, tokenizer = self.model(board)
        if board.decode_time:
            from .board_c import DecodeBoardRunner

            return DecodeBoardRunner(model, tokenizer, board).run(items, contenders, self.progress)
        return BoardRunner(model, tokenizer, board).run(items, contenders, self.progress)

    # ------------------------------------------------------------------------------------------ dev
    def dev_baselines(self, board: Board) -> pd.DataFrame:
        """Every baseline's rows on the dev items, computed once and kept (``row_cache``)."""
        return self._kept_rows(board, "dev", self.items(board, "dev"), [baseline_contender(b) for b in board.baselines])

    def _kept_rows(self, board: Board, split: str, items: pd.DataFrame, contenders: list[Contender]) -> pd.DataFrame:
        """The board's baselines' rows on ``items``, read from ``self.rows`` when the same board, items, model and
        code gave them, else run and kept; any other contender is always run."""
        if not all(c.kind == "baseline" and c.name in board.baselines for c in contenders):
            return self.run(board, items, contenders)
        key = RowKey(board.name, split, json.dumps(asdict(board), sort_keys=True, default=str), items_digest(items),
                     tuple(c.name for c in contenders), model_fingerprint(*self._model_spec(board)),
                     code_fingerprint())
        rows = self.rows.load(key)
        if rows is None:
            rows = self.run(board, items, contenders)
            self.rows.save(key, rows)
        return rows

    def dev(self, board_name: str, contender: Contender) -> DevReport:
        """The contender on the dev items beside the baselines: scores with intervals, gain over the best."""
        board = self.board(board_name)
        base = self.dev_baselines(board)
        items = self.items(board, "dev")
        rows = self.run(board, items, [contender])
        return DevReport(method=contender.name, **score.dev_report(base, rows, board, contender.name))

    def behaviour(self, board: Board, sub: Any, secret: bytes | Round, round_: int = 1,
                  **limits: Any) -> dict[str, str]:
        """``program_behaviour`` and ``program_sketch`` of ``sub`` on the round's first test context per task and
        length, keyed by its secret (``scoring.behaviour``; {} where it does not see the board's hook); inputs once
        per key. ``secret``: the ``Round`` (a secret is checked first, ``open_round``)."""
        from .scoring import behaviour as bh

        if not bh.digestible(sub, board):
            return {}
        rnd = self.open_round(secret, round_)
        model, tokenizer = self.model(board)
        key = bh.sketch_key(rnd.secret, board.name, rnd.number)
        cached = (repr(board), self._loaded_name, key)
        if cached not in self._probes:
            self._probes[cached] = bh.ProbeInputs(BoardRunner(model, tokenizer, board), self.items(board, "test", rnd))
        return bh.behaviour_probe(sub, self._probes[cached], bh.board_ratios(board), limits, key)

    # --------------------------------------------------------------------------------------- test
    def _private(self, round_: int, board: str, entry_id: str) -> Path:
        return private_path(self.root, round_, board, entry_id)

    def open_round(self, secret: bytes | Round, round_: int = 1, events: list[dict] | None = None) -> Round:
        """The secret checked for the round, once (strength; the commitment once the round exists:
        ``rounds.open_round``), as the ``Round`` the verbs pass on; a ``Round`` is returned as it is."""
        return open_round(self.ledger, secret, round_, self.weak_secret_ok, events)

    def ensure_round(self, secret: bytes | Round, round_: int = 1, origin: str = "given") -> Round:
        """The round with its salted commitment in the ledger (recorded when new; ``submit``/``reveal`` check
        the secret against it)."""
        return recorded(self.ledger, self.open_round(secret, round_), self.profile, self.weak_secret_ok, origin)

    def run_test(self, board: Board, secret: bytes | Round, round_: int, contenders: list[Contender],
                 looks: list[dict[str, str]]) -> pd.DataFrame:
        """``contenders`` on the round's test items, after one ``test_look`` event each (``looks``: author and
        program of each): a look counts whether the run then scores, is refused or crashes. ``secret``: the
        ``Round`` (a secret is checked first, ``open_round``; ``round_`` then names the round)."""
        rnd = self.open_round(secret, round_)
        for look in looks:
            self.ledger.append(Kind.TEST_LOOK, {"board": board.name, "round": rnd.number, **look})
        return self._kept_rows(board, "test", self.items(board, "test", rnd), contenders)  # baselines: kept in memory

    def record_baselines(self, board_name: str, secret: bytes | Round, round_: int = 1) -> pd.DataFrame:
        """The board's baselines on the round's test items, in the ledger (skipped when already there); under
        the ledger's lock, so two processes never record them twice. ``secret``: the ``Round``, or a secret
        checked here (``open_round``)."""
        board = self.board(board_name)
        rnd = self.ensure_round(secret, round_)
        round_ = rnd.number
        with self.ledger.lock():
            done = {(payload(e)["board"], payload(e)["name"]) for e in self.ledger.events(Kind.BASELINE)
                    if payload(e).get("round") == round_}
            todo = [b for b in board.baselines if (board.name, b) not in done]
            if not todo:
                return pd.DataFrame()
            runs = [b for b in todo if b != NO_PRESS]
            looks = [{"author": "baseline", "author_key": "baseline", "name": b, "program": f"baseline:{b}"}
                     for b in runs]
            rows = self.run_test(board, rnd, round_, [baseline_contender(b) for b in runs], looks)
            units = score.unit_values(rows, board)
            scores = score.method_scores(units)
            best = score.best_baseline(scores)
            for name in todo:
                save_units(units[units.method == name], self._private(round_, board.name, f"baseline-{name}"))
                ok, why = score.eligible(scores.loc[name], board, scores.loc[best])
                entry = entry_payload(board, name, "baseline", round_, scores.loc[name], ok, why,
                                      units.attrs["excluded_tasks"])
                entry["paired"] = paired_record(self.ledger.events(), self.root, board.name, round_, name,
                                                units[units.method == name])
                self.ledger.append(Kind.BASELINE, entry)
        return scores

    def board_best(self, board: str, round_: int) -> str | None:
        """The board's current best: the highest overall among eligible baselines and submissions that moved it."""
        best = best_entry(self.ledger.events(), board, round_)
        return None if best is None else best[0]

    def submit(self, folder: str | Path, board_name: str, secret: bytes, round_: int = 1,
               rule: str = "frozen_bar", **limits: Any) -> Entry | Rejection:
        """One official submission: an ``Entry`` (or a ``Rejection``). The secret is checked against the round's
        commitment once, before anything runs (``open_round``: the ``Round`` it gives is what the steps after
        use), then the author's rate limit; every refusal (a failed check, a crash) is a ``rejection`` with the
        author and counts toward the limit. Gate and recording happen under the ledger's lock
        (``recording.record_submission``), against the board's best at that moment."""
        from .scoring.behaviour import mismatch
        from .scoring.refusals import shown_name
        from .submissions.folder import SubmissionError, load_submission, metadata_author, metadata_origin
        from .submissions.press import BOUNDARIES, UNREPORTED

        board = self.board(board_name)
        events = self.ledger.events()  # the one read before running
        rnd = self.open_round(secret, round_, events)  # the one check of the secret
        weak_ok = os_boundary.weak_allowed(bool(limits.get("allow_weak", False)))  # the argument or the environment
        boundary = plan(weak_ok)  # fail closed before anything runs: the organiser's setup
        author = metadata_author(folder)
        self.ledger.check_rate(author, events=events)
        try:
            sub = load_submission(folder)
            check_identity(board, sub, events)
            digests = checked_digests(sub.code)  # refused, not a traceback, when the program has none
        except SubmissionError as err:
            return self._reject(board, shown_name(folder), author, err)
        self.record_baselines(board.name, rnd)  # records a new round's commitment: no second check
        origin = metadata_origin(folder)  # e.g. a search run's id, seed, iterations and plan
        # the same program under another comment, docstring or consistent renaming (arena/scoring/code_shape.py),
        # or keeping (nearly) the same tokens on the round's test contexts (arena/scoring/behaviour.py)
        digests.update(self.behaviour(board, sub, rnd, **limits))
        look = {"author": sub.author, "author_key": sub.author_key, "name": sub.name, "program": sub.code_sha256,
                **digests, **look_origin(origin)}
        try:
            rows = self.run_test(board, rnd, rnd.number, [submission_contender(sub, **limits)], [look])
        except SubmissionError as err:
            return self._reject(board, sub.name, sub.author, err, on_test=True)
        except BoundaryUnavailable:
            raise  # the machine's fault, not the submission's: nothing recorded against its author
        except Exception as err:  # noqa: BLE001 - a crash is a refusal with its author, never a traceback
            return self._reject(board, sub.name, sub.author, SubmissionError("crash", f"{type(err).__name__}: {err}"),
                                on_test=True)
        if (refused := mismatch(digests)) is not None:  # a FAILED/UNSTABLE probe is no free pass
            return self._reject(board, sub.name, sub.author, refused, on_test=True)
        ran = BOUNDARIES.get(sub.code_sha256, boundary.name if boundary else UNREPORTED)
        extra = entry_extra(sub, digests, origin, ran, weak_ok)
        return record_submission(self.ledger, self.root, board, sub, score.unit_values(rows, board), rnd.number,
                                 rule, extra)

    def _reject(self, board: Board, name: str, author: str, err: Any, on_test: bool = False) -> Rejection:
        """A ``rejection`` with the author; on test items with a fixed public message (``refusals``)."""
        from .scoring.refusals import record_refusal

        return Rejection.from_payload(record_refusal(self.ledger, self.root, board.name, name, author, err, on_test))

    def reveal(self, secret: bytes, round_: int = 1) -> dict[str, Any]:
        """Prove the round's items were fixed in advance: the salted commitment matches and the seeds follow."""
        from .boards.splits import test_seed
        from .scoring.rounds import matches, round_event

        data = round_event(self.ledger.events(), round_)
        if data is None:
            raise ValueError(f"round {round_} has no commitment in {self.root / 'ledger.jsonl'}")
        ok = matches(secret, data)
        seeds = {b: test_seed(secret, b, round_) for b in self.boards} if ok else {}
        return {"round": round_, "commitment": data["commitment"], "salt": data.get("salt"), "matches": ok,
                "test_seeds": seeds}
