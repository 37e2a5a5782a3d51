"""The arena's evaluations on a Ray cluster: ``arena baselines --ray`` and ``arena dev DIR --ray``.

The unit of work is a (board, group of contexts) chunk with every contender of the run: one shared prefill
per context serves all of them, as on the serial path (``board_runner.BoardRunner``). Chunks go to Ray actors,
one per GPU (or per ``cpus_per_task`` CPUs), each of which loads the model once and keeps it for every chunk
and board of the session (a Ray task on a GPU would reload it: Ray ends a GPU task's worker after each call).

Files: each (context, contender) result is written as it finishes to ``<root>/dev/<board>/ray-parts/`` (dev
items) or ``<root>/private/ray-parts/<board>/`` (test items; the hidden items themselves only travel through
Ray's object store), which every worker must see (a shared filesystem). ``RayArena`` is an ``Arena`` whose
``run`` reads them back in the serial order, so ``dev_baselines`` writes the same dev baselines parquet,
``record_baselines`` the same private per-context values and ledger events: resuming and the ledger work as
without Ray, and the parts are removed once a board is recorded.

Faults: a killed worker's actor is restarted and its chunk retried (``max_retries``); finished contexts are
read back, not recomputed. A contender that raises is dropped from the run with its reason
(``ContendersFailed``; a submission's own ``SubmissionError`` is raised as on the serial path, so ``submit``
records a rejection); ``ray_baselines`` records the other baselines and reports it. Ctrl-C kills the actors
and keeps what is finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..methods.registry import NO_PRESS
from ..util.ray import Tracker, collect, ray_session, task_resources
from .arena import Arena
from .board_runner import Contender
from .boards.boards import Board
from .row_cache import code_fingerprint, model_fingerprint
from .scoring.rounds import Round


class ContendersFailed(RuntimeError):
    """Some contenders raised on some context: {name: reason}; the others' results are saved."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = dict(failed)
        super().__init__("; ".join(f"{name}: {reason}" for name, reason in failed.items()))


class ChunksFailed(RuntimeError):
    """Chunks whose actor died beyond its retries; finished contexts are kept, a re-run does the rest."""


@dataclass
class RayArena(Arena):
    """An ``Arena`` whose evaluations run on Ray; use it as a context manager (it holds the cluster session
    and the actors; a first ``run`` outside ``with`` opens them, ``close()`` ends them). ``address``: None
    starts a local cluster (``ray.init()``), "auto" or "ray://host:10001" joins one."""

    address: str | None = None
    cpus_per_task: float = 1
    max_retries: int = 3
    contexts_per_chunk: int = 2
    workers: int | None = None
    _session: Any = field(default=None, init=False, repr=False)
    _actors: dict = field(default_factory=dict, init=False, repr=False)  # {model spec: actors}
    _tokenizers: dict = field(default_factory=dict, init=False, repr=False)

    def __enter__(self) -> RayArena:
        self._session = ray_session(self.address)
        self._ray = self._session.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._session is not None:
            self._kill_actors()
            session, self._session = self._session, None
            session.__exit__(*exc)

    def close(self) -> None:
        self.__exit__(None, None, None)

    def model(self, board: Board | None = None) -> tuple[Any, Any]:
        """(None, tokenizer): the driver only draws items; the actors load the model."""
        name = self._model_spec(board)[0]
        if name not in self._tokenizers:
            from transformers import AutoTokenizer

            from ..models.loading import resolve

            tokenizer = AutoTokenizer.from_pretrained(resolve(name))
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._tokenizers[name] = tokenizer
        return None, self._tokenizers[name]

    def parts_dir(self, board: Board, split: str) -> Path:
        """Where the (context, contender) results of a board's split are kept until the board is recorded."""
        if split == "dev":
            return self.root / "dev" / board.name / "ray-parts"
        return self.root / "private" / "ray-parts" / board.name

    def run(self, board: Board, items: pd.DataFrame, contenders: list[Contender]) -> pd.DataFrame:
        """``Arena.run`` on Ray: the same rows in the same order; ``ContendersFailed`` if any contender raised."""
        if self._session is None:
            self.__enter__()
        contenders = [c for c in contenders if c.name != NO_PRESS]
        parts = self.parts_dir(board, items.attrs.get("split", "test"))
        keys = _part_keys(contenders, uuid.uuid4().hex[:8])
        contexts = [(context_key(board, self._model_spec(board), group), group)
                    for _, group in items.groupby("context_id", sort=False)]
        chunks = [contexts[i:i + self.contexts_per_chunk] for i in range(0, len(contexts), self.contexts_per_chunk)]
        actors = self._ensure_actors(self._model_spec(board), len(chunks))
        tracker = self._ray.remote(num_cpus=0)(Tracker).remote()
        refs = {actors[i % len(actors)].evaluate.remote(board, chunk, contenders, keys, str(parts), tracker): i
                for i, chunk in enumerate(chunks)}
        results, errors = collect(self._ray, refs, len(contexts), lambda: self._ray.get(tracker.count.remote()),
                                  f"board {board.name} on Ray: contexts", self.progress, self._kill_actors,
                                  "finished contexts are saved; run the same command to resume")
        if errors:
            raise ChunksFailed(f"{len(errors)} of {len(chunks)} chunks failed after {self.max_retries} retries "
                               f"({next(iter(errors.values()))}); finished contexts are saved in {parts}: run "
                               "the same command to resume")
        failed: dict[str, tuple[str, str | None]] = {}
        for result in results.values():
            failed.update({k: v for k, v in result.items() if k not in failed})
        try:
            _raise_failed(failed)
            return _assemble(parts, [key for key, _ in contexts], [NO_PRESS, *(keys[c.name] for c in contenders)])
        finally:  # a submission is recomputed on every run, as on the serial path
            for c in contenders:
                if c.kind != "baseline":
                    _remove(parts, keys[c.name])

    def _ensure_actors(self, spec: tuple[str, str | None, str], chunks: int) -> list:
        """Actors holding ``spec``'s model: one per GPU (or per ``cpus_per_task`` CPUs), at most one per chunk,
        kept for the session (those of another model are ended first: a board with its own model must not
        keep the profile's in memory beside it)."""
        if spec not in self._actors:
            self._kill_actors()
            self._actors[spec] = []
        actors = self._actors[spec]
        cluster = self._ray.cluster_resources()
        resources = task_resources(spec[1], cluster, self.cpus_per_task, "the arena")
        per, kind = (resources["num_gpus"], "GPU") if "num_gpus" in resources else (self.cpus_per_task, "CPU")
        wanted = min(self.workers or max(1, int(cluster.get(kind, 1) // per)), max(1, chunks))
        cls = self._ray.remote(_Evaluator).options(**resources, max_restarts=self.max_retries,
                                                   max_task_retries=self.max_retries)
        actors += [cls.remote(*spec) for _ in range(wanted - len(actors))]
        return actors[:wanted]

    def _kill_actors(self) -> None:
        for actors in self._actors.values():
            for actor in actors:
                self._ray.kill(actor)
        self._actors = {}


def _raise_failed(failed: dict[str, tuple[str, str | None]]) -> None:
    """A submission's own error as the serial path raises it (``SubmissionError``: ``submit`` records it as a
    rejection, ``dev`` reports it); any other contender's as ``ContendersFailed``."""
    if not failed:
        return
    if all(kind is not None for _, kind in failed.values()):
        from .submissions.folder import SubmissionError

        reason, kind = next(iter(failed.values()))
        raise SubmissionError(kind, reason.split(": ", 2)[-1])
    raise ContendersFailed({name: reason for name, (reason, _) in failed.items()})


def context_key(board: Board, model: tuple, items: pd.DataFrame) -> str:
    """What a context's results depend on: the board's rules, the model (and its files), the context's items and
    the library's code (``row_cache``): a run resumed after an edit recomputes its parts rather than reusing them."""
    text = json.dumps([asdict(board), list(model), model_fingerprint(*model), code_fingerprint(),
                       items[list(items.columns)].astype(str).values.tolist()], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _part_keys(contenders: list[Contender], run_id: str) -> dict[str, str]:
    """File names per contender: a baseline's results are reused across runs, a submission's only within one."""
    safe = {c.name: "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in c.name) for c in contenders}
    return {c.name: f"baseline-{safe[c.name]}" if c.kind == "baseline" else f"{c.kind}-{safe[c.name]}-{run_id}"
            for c in contenders}


def _part(parts: Path, context: str, key: str) -> Path:
    return parts / context / f"{key}.parquet"


def _write(path: Path, rows: pd.DataFrame) -> None:
    """Atomic: a worker killed while writing leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    rows.to_parquet(tmp)
    os.replace(tmp, path)


def _remove(parts: Path, key: str) -> None:
    for path in parts.glob(f"*/{key}.parquet"):
        path.unlink(missing_ok=True)


def _assemble(parts: Path, contexts: list[str], keys: list[str]) -> pd.DataFrame:
    """Per context, the full cache then each contender: ``BoardRunner.run``'s order."""
    frames = [pd.read_parquet(_part(parts, ctx, key)) for ctx in contexts for key in keys]
    return pd.concat(frames, ignore_index=True)


class _Evaluator:
    """A Ray actor: the model, loaded once, evaluating chunks of contexts into the parts folder."""

    def __init__(self, model: str, device: str | None, dtype: str) -> None:
        from ..models.loading import load_model

        self.model, self.tokenizer = load_model(model, device=device, dtype=dtype)

    def evaluate(self, board: Board, chunk: list[tuple[str, pd.DataFrame]], contenders: list[Contender],
                 keys: dict[str, str], parts: str, tracker: Any) -> dict[str, tuple[str, str | None]]:
        """Every unfinished (context, contender) of the chunk; returns {contender: (reason, SubmissionError
        kind or None)} of those that raised (skipped for the chunk's later contexts; the others go on)."""
        if getattr(board, "decode_time", False):
            from .board_c import DecodeBoardRunner as Runner
        else:
            from .board_runner import BoardRunner as Runner

        runner, failed = Runner(self.model, self.tokenizer, board), {}
        for context, items in chunk:
            todo = [c for c in contenders if c.name not in failed
                    and not _part(Path(parts), context, keys[c.name]).exists()]
            if todo or not _part(Path(parts), context, NO_PRESS).exists():
                for key, rows in self._context(runner, items, todo, failed).items():
                    _write(_part(Path(parts), context, keys.get(key, key)), rows)
            tracker.settled.remote(context)
        return failed

    def _context(self, runner: Any, items: pd.DataFrame, todo: list[Contender],
                 failed: dict) -> dict[str, pd.DataFrame]:
        """{contender (or full): its rows} for one context: all together, or one by one when that raises."""
        try:
            rows = runner.run(items, todo, progress=False)
        except Exception:  # which contender raised is found below
            rows = self._one_by_one(runner, items, todo, failed)
        return {name: part.reset_index(drop=True) for name, part in rows.groupby("method", sort=False)}

    def _one_by_one(self, runner: Any, items: pd.DataFrame, todo: list[Contender],
                    failed: dict) -> pd.DataFrame:
        from ..models.prefill import SharedPrefill
        from .submissions.folder import SubmissionError

        frames = []
        for c in [None, *todo]:
            try:
                rows = runner.run(items, [] if c is None else [c], progress=False)
            except Exception as err:  # a contender's own failure must not stop the others
                SharedPrefill.clear_masks(self.model)
                if c is None:
                    raise
                failed[c.name] = (f"{type(err).__name__}: {err}",
                                  err.kind if isinstance(err, SubmissionError) else None)
                continue
            frames.append(rows if c is None else rows[rows.method != NO_PRESS])
        return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------------------------- the verbs on Ray
def ray_baselines(arena: RayArena, boards: list[str], secret: bytes | Round, round_: int = 1
                  ) -> dict[str, tuple[pd.DataFrame, dict[str, str]]]:
    """``record_baselines`` of each board on Ray: {board: (scores, {baseline: reason} of those that raised)}.
    Scores are empty when the board was already recorded; a failed baseline is left out of the ledger (a
    re-run records it once it is fixed) and the board's parts are kept for that re-run."""
    out, rnd = {}, arena.open_round(secret, round_)  # the secret checked once for every board
    for name in boards:
        board = arena.board(name)
        scores, failed = _without_failed(arena, name, lambda name=name: arena.record_baselines(name, rnd))
        if not failed:
            shutil.rmtree(arena.parts_dir(board, "test"), ignore_errors=True)
        out[name] = (scores, failed)
    return out


def ray_dev(arena: RayArena, board_name: str, contender: Contender) -> dict[str, Any]:
    """``Arena.dev`` on Ray: the same report plus ``failed_baselines`` ({name: reason}); raises
    ``SubmissionError`` (a submission) or ``ContendersFailed`` when the contender itself raised (the
    baselines' dev results are kept)."""
    board = arena.board(board_name)
    report, failed = _without_failed(arena, board_name, lambda: arena.dev(board_name, contender))
    if not failed:
        shutil.rmtree(arena.parts_dir(board, "dev"), ignore_errors=True)
    return {**report, "failed_baselines": failed}


def _without_failed(arena: RayArena, name: str, call: Any) -> tuple[Any, dict[str, str]]:
    """``call()``; if baselines of the board raised, again without them (the others' results are read back)."""
    try:
        return call(), {}
    except ContendersFailed as err:
        board = arena.boards[name]
        failed = {k: v for k, v in err.failed.items() if k in board.baselines}
        if not failed or len(failed) < len(err.failed):
            raise
    arena.boards[name] = replace(board, baselines=tuple(b for b in board.baselines if b not in failed))
    try:
        return call(), failed
    except ContendersFailed as err:
        raise ContendersFailed({**failed, **err.failed}) from None
    finally:
        arena.boards[name] = board
