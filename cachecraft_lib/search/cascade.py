"""The cascade evaluator behind ``evaluator.py``: stage 0 checks, stage 1 (gate), stage 2, fitness.

Stage 0: the program parses, imports only what the policy interface allows, defines both functions and
leaves everything outside its EVOLVE-BLOCK untouched. Stage 1: RULER on a small slice, S1; the candidate
passes the gate when S1 >= gate. Stage 2: a larger, disjoint slice, S2. Fitness F = 0.25*S1 + 0.75*S2; a
program stopped at the gate keeps 0.25*S1 (OpenEvolve's ``combined_score``; its threshold is 0.25*gate).

The paper's gate is 45 on Llama-3.1-8B, where the V5 seed scores 91.2 at r = 0.83 (RULER 4k): the gate
stops programs far below the seed, not programs below the uncompressed model. For another model it keeps
that meaning: gate = 45/91.2 x S1(seed) on this model's stage-1 slice. (Scaling by the uncompressed score
instead, 45/95.8 x S1(no compression), assumes compression costs little, as on the paper's models; on a
small model that loses much of its score at r = 0.83 it stops every program, the seed included. It is the
fallback when no seed program is given.)

Every candidate runs in a ``Sandbox``; its selections are validated here. Any violation, hang, crash,
memory blow-up or tampering makes the candidate *invalid* (``valid = 0``, fitness 0) with the reason in
the artifacts, which OpenEvolve shows the mutator in the next prompt. The model, the data and every
sample's feature contexts are computed once per worker process and reused for all candidates; a sample's
prefill is not kept but re-run when a candidate answers (``samples``), so memory does not grow with the
number of stage samples. Two candidates that keep the same tokens of a sample get the same greedy answer, so
each sample's answer is computed once per distinct kept set (``memo_answers``; ``benchmarks/bench_cascade.py``
compares it with answering every time).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..models.loading import load_model
from ..models.pipeline import TokenwiseQuestionPipeline
from ..ruler import load, score
from .samples import StageSample, answer, build_sample, kept_digest
from .sandbox import CandidateFailed, Sandbox
from .static_checks import stage0

PAPER_GATE, PAPER_NO_PRESS, PAPER_SEED_S1 = 45.0, 95.8, 91.2
CONFIG_ENV = "CACHECRAFT_SEARCH_CONFIG"


@dataclass
class SearchSettings:
    """Everything the evaluator needs; written to ``<run>/search_config.json`` by ``cachecraft evolve``."""

    model: str
    length: int
    compression_ratio: float = 0.83
    stage1_samples_per_task: int = 1
    stage2_samples_per_task: int = 2
    tasks: list[str] | None = None
    max_new_tokens: int | None = None
    seed: int = 42
    ruler_source: str = "offline"
    gate: float | None = None  # None = scaled from the paper's 45 (see module doc)
    seed_program: str | None = None  # its text outside the EVOLVE-BLOCK must stay unchanged
    timeout_s: float = 20.0
    memory_mb: int = 1024
    n_queries: int = 64
    window: int = 32
    device: str | None = "cpu"
    dtype: str = "auto"  # the profile's (float32 on the CPU profiles, bfloat16 on the paper's)
    extras: dict = field(default_factory=dict)

    def save(self, path: str | Path) -> Path:
        Path(path).write_text(json.dumps(asdict(self), indent=2))
        return Path(path)

    @classmethod
    def from_file(cls, path: str | Path) -> SearchSettings:
        return cls(**json.loads(Path(path).read_text()))


class CascadeEvaluator:
    """Holds the model, data and per-sample prefill state of one worker; scores candidates stage by stage."""

    memo_answers: bool = True  # False: answer every sample anew (the benchmark's baseline)

    def __init__(self, settings: SearchSettings) -> None:
        self.settings = settings
        self.model, self.tokenizer = load_model(settings.model, device=settings.device, dtype=settings.dtype)
        per_task = settings.stage1_samples_per_task + settings.stage2_samples_per_task
        data = load(settings.length, self.tokenizer, source=settings.ruler_source, samples_per_task=per_task,
                    seed=settings.seed, tasks=settings.tasks)
        if settings.max_new_tokens is not None:
            data = data.assign(max_new_tokens=settings.max_new_tokens)
        rank = data.groupby("task", sort=False).cumcount()
        self.stage_rows = {1: data[rank < settings.stage1_samples_per_task].reset_index(drop=True),
                           2: data[rank >= settings.stage1_samples_per_task].reset_index(drop=True)}
        self.pipe = TokenwiseQuestionPipeline(model=self.model, tokenizer=self.tokenizer, device=self.model.device)
        self._samples: dict[tuple[int, int], StageSample] = {}
        self._s1_cache: dict[str, dict] = {}
        self._answers: dict[tuple[int, int, str], str] = {}  # (stage, sample, kept set's digest) -> answer
        self.answered = 0  # answers computed (the rest were read from ``_answers``)
        self._s1_scores: dict[str, float] = {}  # S1 already measured (the seed's, for the gate), by source digest
        self.seed_source = Path(settings.seed_program).read_text() if settings.seed_program else None
        self.gate = settings.gate if settings.gate is not None else self._scaled_gate()

    # ------------------------------------------------------------------------------------ samples
    def _sample(self, stage: int, i: int) -> StageSample:
        """The stage's ``i``-th sample: its feature contexts and ids, built once (``samples``: no prefill kept)."""
        key = (stage, i)
        if key not in self._samples:
            self._samples[key] = build_sample(self.model, self.pipe, self.stage_rows[stage].iloc[i],
                                              self.settings.compression_ratio, self.settings.n_queries,
                                              self.settings.window)
        return self._samples[key]

    def _answer(self, sample: StageSample, kept: list | None) -> str:
        self.answered += 1
        return answer(self.model, self.pipe, sample, kept)

    def _kept_answer(self, stage: int, i: int, kept: list) -> str:
        """The stage's ``i``-th sample answered from the cache that keeps ``kept``: computed once per distinct kept
        set (greedy decoding from the same cache gives the same answer)."""
        if not self.memo_answers:
            return self._answer(self._sample(stage, i), kept)
        key = (stage, i, kept_digest(kept))
        if key not in self._answers:
            self._answers[key] = self._answer(self._sample(stage, i), kept)
        return self._answers[key]

    def _scaled_gate(self) -> float:
        """The paper's gate in this model's terms: relative to the seed's S1 (module doc)."""
        if self.seed_source is not None:
            try:
                self.seed_s1 = self.run_stage(self.seed_source, 1)
                self._s1_scores[_digest(self.seed_source)] = self.seed_s1  # OpenEvolve's first evaluation
            except CandidateFailed as err:
                raise ValueError(f"the seed program {self.settings.seed_program} fails its own cascade "
                                 f"({err.kind}: {err}); fix the seed or pass an explicit gate") from err
            return round(PAPER_GATE / PAPER_SEED_S1 * self.seed_s1, 2)
        preds = [self._answer(self._sample(1, i), None) for i in range(len(self.stage_rows[1]))]
        full = score(self.stage_rows[1].assign(predicted_answer=preds))["aggregate"]
        self.no_press_s1 = full
        return round(PAPER_GATE / PAPER_NO_PRESS * full, 2)

    # ------------------------------------------------------------------------------------- stages
    def run_stage(self, source: str, stage: int) -> float:
        """RULER score of the candidate on the stage's slice (raises ``CandidateFailed``)."""
        rows = self.stage_rows[stage]
        preds = []
        with Sandbox(source, timeout_s=self.settings.timeout_s, memory_mb=self.settings.memory_mb) as box:
            for i in range(len(rows)):
                kept = box.select_layers(self._sample(stage, i).contexts)
                preds.append(self._kept_answer(stage, i, kept))
        return score(rows.assign(predicted_answer=preds))["aggregate"]

    def stage1(self, source: str) -> dict:
        start = time.time()
        problems = stage0(source, self.seed_source)
        if problems:
            return _invalid("stage0", "; ".join(problems), start)
        s1 = self._s1_scores.get(_digest(source))
        if s1 is None:
            try:
                s1 = self.run_stage(source, 1)
            except CandidateFailed as err:
                return _invalid(err.kind, str(err), start)
        result = {"metrics": {"combined_score": 0.25 * s1, "s1": s1, "valid": 1.0, "gate": self.gate,
                              "passed_gate": float(s1 >= self.gate)},
                  "artifacts": {"stage1": f"S1 = {s1:.2f} on {len(self.stage_rows[1])} samples; gate {self.gate:.2f}"
                                          f" -> {'passed' if s1 >= self.gate else 'stopped at the gate'}"},
                  "seconds": time.time() - start}
        self._s1_cache[_digest(source)] = result
        return result

    def stage2(self, source: str) -> dict:
        start = time.time()
        first = self._s1_cache.get(_digest(source)) or self.stage1(source)
        if first["metrics"].get("valid") != 1.0:
            return first
        s1 = first["metrics"]["s1"]
        try:
            s2 = self.run_stage(source, 2)
        except CandidateFailed as err:  # a failure on the larger slice is still a violation
            return _invalid(err.kind, str(err), start)
        fitness = 0.25 * s1 + 0.75 * s2
        return {"metrics": {**first["metrics"], "combined_score": fitness, "s2": s2},
                "artifacts": {**first["artifacts"], "stage2": f"S2 = {s2:.2f} on {len(self.stage_rows[2])} samples; "
                                                              f"F = 0.25*S1 + 0.75*S2 = {fitness:.2f}"},
                "seconds": time.time() - start}


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _invalid(kind: str, reason: str, start: float) -> dict:
    """An invalid candidate: fitness 0, ``valid = 0``, and the reason for the next prompt."""
    return {"metrics": {"combined_score": 0.0, "s1": 0.0, "valid": 0.0, "passed_gate": 0.0},
            "artifacts": {"invalid": f"INVALID ({kind}): {reason}"[:1500], "failure_kind": kind},
            "seconds": time.time() - start}


def as_openevolve(result: dict):
    """Our result dict as OpenEvolve's ``EvaluationResult``."""
    from openevolve.evaluation_result import EvaluationResult

    return EvaluationResult(metrics=result["metrics"], artifacts=result["artifacts"])


