"""The search's fitness on an arena board: the board's own dev score, through a cascade (issue 38, item 1).

A candidate policy program is, in order:

0. checked without running (``static_checks.stage0``: parse, imports, both functions, EVOLVE-BLOCK) and
   converted to an arena submission folder (``arena.submissions.from_program.program_to_submission``, the same conversion a
   search's best program gets before ``arena submit``);
1. run on the gate items, the first dev context of each task, exactly as an arena submission runs (the arena's
   sandbox, its answers validated outside and applied by a real KVPress press); its score there is ``arena dev``'s
   score restricted to those contexts; it passes when that is at least the gate;
2. run on the remaining dev contexts; its fitness is ``arena.score.dev_report``'s ``overall`` on all dev items,
   the function ``arena dev`` itself calls, so the search's fitness for a program is its ``arena dev`` score.

The gate keeps the meaning of the paper's cascade (``cascade``): 45/91.2 of the seed program's score on the
gate items, unless given. ``evaluate`` runs a whole population at once (``population.PopulationRunner``: each
context's prefill and features kept across generations, one sandbox per candidate, every candidate x budget
decoded in shared batches);
``evaluate_one`` runs one candidate at a time through ``Arena.run``, the reference the population path must
equal. The test split is never read: only ``Arena.items(board, "dev")``, which needs no secret; ``contexts`` keeps
a part of them (the search half of ``selection.split_dev``).

``load_board_fitness`` is what loads (the arena, the dev items and baselines, the model, the seed's run that sets
the gate); ``BoardFitness`` is built from those parts and loads nothing, so a test can build one from prepared
parts. The search builds it with ``dev_only.dev_fitness``, behind the guard that makes the secret unreachable.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from openevolve.utils.code_utils import extract_diffs

from ..arena.arena import Arena
from ..arena.boards.boards import Board
from ..arena.scoring.score import dev_report
from ..arena.submissions.folder import SubmissionError
from .candidate_result import CandidateResult, candidate_name
from .cascade import PAPER_GATE, PAPER_SEED_S1
from .policy_batch import shares_features
from .population import Candidate, PopulationRunner
from .search_boards import search_boards, searchable
from .static_checks import stage0


def refuse_non_dev(board: Board, items: pd.DataFrame, base: pd.DataFrame) -> None:
    """``ValueError`` unless ``items`` say they are ``board``'s dev split (``attrs['split'] == 'dev'`` and, when
    they carry one, the board's public dev seed, as ``Arena.items`` sets them) and ``base``, when it says a
    split, says dev: the search's fitness never reads another split (issue 49)."""
    from ..arena.boards.items import split_seed

    split, seed = items.attrs.get("split"), items.attrs.get("seed")
    if split != "dev":
        raise ValueError(f"a board fitness reads only the dev items: these items' split is {split!r} (attrs['split']"
                         "; Arena.items(board, 'dev') sets 'dev'), refused")
    if seed is not None and seed != split_seed(board, "dev"):
        raise ValueError(f"these items say split 'dev' but were drawn with seed {seed}, not board {board.name}'s "
                         f"public dev seed {split_seed(board, 'dev')}: refused")
    if base.attrs.get("split", "dev") != "dev":
        raise ValueError(f"a board fitness's baselines are the dev baselines: these say split "
                         f"{base.attrs['split']!r}, refused")


@dataclass
class _Converted:
    name: str
    submission: Any
    folder: tempfile.TemporaryDirectory


@dataclass(eq=False)
class BoardFitness:
    """A board's dev fitness for policy programs, from parts already loaded (``load_board_fitness`` loads them):
    the arena (``evaluate_one`` runs through it), the board, its dev items and the dev baselines' rows on them
    (both restricted alike to a part of the dev contexts, when the search or selection half), the population
    runner (the model and tokenizer inside), the gate, the seed program's source (stage 0 compares candidates
    with it) and the sandbox limits. Building one loads and runs nothing; the gate contexts, the first dev
    context of each task, follow from the items. Items that do not say they are the board's dev split are
    refused (``refuse_non_dev``); ``guarded`` is set only by ``dev_only.dev_fitness``."""

    arena: Arena = field(repr=False)
    board: Board = field(repr=False)
    items: pd.DataFrame = field(repr=False)
    base: pd.DataFrame = field(repr=False)
    runner: PopulationRunner = field(repr=False)
    gate: float = 0.0
    seed_source: str | None = field(default=None, repr=False)
    limits: dict = field(default_factory=dict)
    gate_ids: list[str] = field(init=False)
    guarded: bool = field(default=False, init=False)  # set only by ``dev_only.dev_fitness`` (the guard in place)
    _gates: dict[str, tuple[CandidateResult, pd.DataFrame]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        refuse_non_dev(self.board, self.items, self.base)
        first = self.items.groupby("task", sort=False).context_id.first()
        self.gate_ids = list(dict.fromkeys(first))

    # ---------------------------------------------------------------------------------------- pieces
    def gate_items(self) -> pd.DataFrame:
        return self.items[self.items.context_id.isin(self.gate_ids)]

    def rest_items(self) -> pd.DataFrame:
        return self.items[~self.items.context_id.isin(self.gate_ids)]

    def report(self, rows: pd.DataFrame, name: str, gate_only: bool = False) -> dict:
        """``arena dev``'s report of ``name`` from its rows (on the gate items only, or on all dev items)."""
        base = self.base[self.base.context_id.isin(self.gate_ids)] if gate_only else self.base
        return dev_report(base, rows, self.board, name)

    def convert(self, source: str) -> _Converted:
        """The program as an arena submission folder (raises ``ValueError``/``SubmissionError`` when it is not one)."""
        from ..arena.submissions.from_program import program_to_submission

        name = candidate_name(source)
        folder = tempfile.TemporaryDirectory(prefix="cachecraft-candidate-")
        program = Path(folder.name) / "program.py"
        program.write_text(source)
        sub = program_to_submission(program, Path(folder.name) / "submission", name, boards=(self.board.name,))
        return _Converted(name, sub, folder)

    def contender(self, converted: _Converted):
        from ..arena.board_runner import submission_contender

        return submission_contender(converted.submission, **self.limits)

    def candidate(self, converted: _Converted) -> Candidate:
        """The converted program on the population path (the same submission and limits as ``contender``)."""
        return Candidate(converted.name, converted.submission, self.limits)

    def _checked(self, source: str) -> _Converted | CandidateResult:
        problems = stage0(source, self.seed_source)
        if problems:
            return CandidateResult(candidate_name(source), False, 0, self.gate, failure_kind="stage0",
                                   reason="; ".join(problems))
        try:
            return self.convert(source)
        except (ValueError, SubmissionError) as err:
            return CandidateResult(candidate_name(source), False, 0, self.gate, failure_kind="convert", reason=str(err))

    # ------------------------------------------------------------------------------------ the cascade
    def evaluate(self, sources: list[str], full: bool = True) -> list[CandidateResult]:
        """A population through the cascade in one pass per stage (batched); results in the order of ``sources``.
        ``full=False`` stops after the gate (stage 1 only). A candidate's gate result is kept (by its source's
        digest), so OpenEvolve's stage 2 after its stage 1 does not run the gate items again."""
        start = time.time()
        try:
            out = self._evaluate(sources, full)
        finally:
            self.runner.close()  # one sandbox per candidate for the whole population, ended here
        seconds = (time.time() - start) / max(1, len(sources))
        for r in out:
            r.seconds = seconds
        return out

    def _evaluate(self, sources: list[str], full: bool) -> list[CandidateResult]:
        checked = [self._checked(s) for s in sources]
        own = {c.name: self.evaluate_one(src, full) for c, src in zip(checked, sources, strict=True)
               if isinstance(c, _Converted) and not shares_features(c.submission.source)}
        live = {c.name: c for c in checked if isinstance(c, _Converted) and c.name not in own}
        self._run_gate([c for c in live.values() if c.name not in self._gates])
        results = {name: replace(self._gates[name][0]) for name in live}
        passed = [n for n in live if results[n].valid and results[n].passed_gate]
        if full and passed:
            rest = self.runner.run(self.rest_items(), [self.candidate(live[n]) for n in passed])
            for name in passed:
                failure = self.runner.failures.get(name)
                if failure is not None:
                    results[name] = CandidateResult(name, False, 2, self.gate, results[name].gate_score,
                                                    failure_kind=failure.split(":")[0], reason=failure)
                    continue
                mine = rest[rest.method == name]  # empty when the gate items are all the contexts (a small half)
                rows = pd.concat([self._gates[name][1], mine], ignore_index=True) if len(mine) else self._gates[name][1]
                rep = self.report(rows, name)
                results[name].stage, results[name].report = 2, rep
                results[name].fitness = float(rep["scores"].loc[name, "overall"])
        results.update(own)  # programs that change the feature code: one at a time (``policy_batch.shares_features``)
        return [c if isinstance(c, CandidateResult) else results[c.name] for c in checked]

    def _run_gate(self, todo: list[_Converted]) -> None:
        """Stage 1 for the candidates not yet gated: one batched pass over the gate items."""
        if not todo:
            return
        rows = self.runner.run(self.gate_items(), [self.candidate(c) for c in todo])
        for c in todo:
            failure = self.runner.failures.get(c.name)
            if failure is not None:
                self._gates[c.name] = (CandidateResult(c.name, False, 1, self.gate, failure_kind=failure.split(":")[0],
                                                       reason=failure), rows.iloc[:0])
                continue
            mine = rows[rows.method == c.name]
            score = float(self.report(mine, c.name, gate_only=True)["scores"].loc[c.name, "overall"])
            self._gates[c.name] = (CandidateResult(c.name, True, 1, self.gate, gate_score=score), mine)

    def evaluate_one(self, source: str, full: bool = True) -> CandidateResult:
        """One candidate through the same cascade with ``Arena.run`` (the path ``arena dev`` takes): the reference."""
        start = time.time()
        checked = self._checked(source)
        if isinstance(checked, CandidateResult):
            return checked
        name, contender = checked.name, self.contender(checked)
        try:
            gate_rows = self.arena.run(self.board, self.gate_items(), [contender])
            score = float(self.report(gate_rows, name, gate_only=True)["scores"].loc[name, "overall"])
            result = CandidateResult(name, True, 1, self.gate, gate_score=score)
            if full and score >= self.gate:
                rest = self.arena.run(self.board, self.rest_items(), [contender])
                rows = pd.concat([gate_rows, rest], ignore_index=True)
                result.stage, result.report = 2, self.report(rows, name)
                result.fitness = float(result.report["scores"].loc[name, "overall"])
        except SubmissionError as err:
            result = CandidateResult(name, False, 1, self.gate, failure_kind=err.kind, reason=str(err))
        result.seconds = time.time() - start
        return result

    def seed_gate(self) -> float:
        """45/91.2 of the seed's score on the gate items (``cascade``'s scaling); 0 without a seed. It runs the
        seed (under the gate in place, 0 when none yet); the stage-1 results kept so far take the new gate."""
        if self.seed_source is None:
            return 0.0
        seed = self.evaluate([self.seed_source], full=False)[0]
        if not seed.valid:
            raise ValueError(f"the seed program fails its own cascade ({seed.failure_kind}: {seed.reason})")
        gate = round(PAPER_GATE / PAPER_SEED_S1 * seed.gate_score, 4)
        for result, _ in self._gates.values():
            result.gate = gate
        return gate

    # ------------------------------------------------------------------------- OpenEvolve's two stages
    def stage1(self, source: str) -> dict:
        return self.evaluate([source], full=False)[0].as_cascade()

    def stage2(self, source: str) -> dict:
        return self.evaluate([source])[0].as_cascade()


def load_board_fitness(board: str = "A", profile: str = "cpu", root: str | Path | None = None,
                       seed_program: str | Path | None = None, gate: float | None = None,
                       limits: dict | None = None, arena: Arena | None = None,
                       contexts: Sequence[str] | None = None) -> BoardFitness:
    """A board's fitness, loaded. In order: the arena (``profile``'s, in ``root``, unless given), the board (a
    prefill board: A, B_online, B_offline), its dev items (public seed, no secret; drawn with the profile's
    tokenizer, so the model loads here), the dev baselines (cached in the arena's root), both kept to
    ``contexts`` when given, the population runner on the model and tokenizer, then the seed program run on the
    gate items to set the gate (``seed_gate``) unless ``gate`` is given."""
    arena = arena or Arena(profile=profile, root=root, progress=False)
    spec = arena.board(board)
    if not searchable(spec):
        raise ValueError(f"board {board} evicts while decoding or scores MATH-500; the search's board fitness "
                         f"covers the prefill boards ({', '.join(search_boards(profile))})")
    items, base = arena.items(spec, "dev"), arena.dev_baselines(spec).copy()
    base.attrs["split"] = "dev"  # the dev baselines (the cached file does not say so)
    if contexts is not None:  # a part of the dev items (``selection.split_dev``): the search or selection half
        keep = set(contexts)
        if not keep <= set(items.context_id):
            raise ValueError(f"board {board}'s dev items have no context(s) {sorted(keep - set(items.context_id))}")
        items = items[items.context_id.isin(keep)].reset_index(drop=True)
        base = base[base.context_id.isin(keep)].reset_index(drop=True)
    model, tokenizer = arena.model(spec)
    fitness = BoardFitness(arena, spec, items, base, PopulationRunner(model, tokenizer, spec),
                           seed_source=Path(seed_program).read_text() if seed_program else None,
                           limits=dict(limits or {}))
    fitness.gate = gate if gate is not None else fitness.seed_gate()
    return fitness


def apply_diff(source: str, diff: str) -> str:
    """Apply every ``SEARCH/REPLACE`` block of ``diff`` to ``source`` in order. OpenEvolve's own parser reads the
    blocks (one grammar for both search engines; a stray or missing delimiter is a ``ValueError``); unlike its
    ``apply_diff``, a block whose SEARCH text is not in the program is an error, never silently skipped."""
    for search, replacement in extract_diffs(diff):
        if search not in source:
            raise ValueError("the edit's SEARCH text is not in the program")
        source = source.replace(search, replacement, 1)
    return source


def offline_population(seed_source: str, n: int, random_seed: int = 0, edits: int = 2) -> list[str]:
    """``n`` distinct programs, each ``edits`` offline-mutator edits away from ``seed_source`` (deterministic for a
    seed): a generation to benchmark or test the population path with, without OpenEvolve."""
    import random

    from .mutator import edit_scorer

    rng, out, seen = random.Random(random_seed), [], {seed_source}
    for _ in range(50 * n):
        if len(out) == n:
            break
        program = seed_source
        for _ in range(edits):
            program = apply_diff(program, edit_scorer(program, rng)[0])
        if program not in seen:
            seen.add(program)
            out.append(program)
    return out
