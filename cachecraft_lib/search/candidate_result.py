"""One candidate's way through the board cascade (``board_fitness``), and the name its submission gets.

Kept apart from ``board_fitness``, which produces these results: there the cascade, here what a result says
(and how OpenEvolve reads it, ``as_cascade``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass
class CandidateResult:
    """One candidate's way through the cascade. ``valid``: it passed stage 0, loaded, and no sandbox call failed;
    ``gate_score``: its overall score on the gate items; ``fitness``: its ``arena dev`` overall on all dev items
    (None when stopped earlier); ``report``: ``dev_report``'s dict (scores with intervals, gain over the best
    baseline, eligibility) for those that reached stage 2."""

    name: str
    valid: bool
    stage: int  # the last stage it reached: 0, 1 or 2
    gate: float
    gate_score: float | None = None
    fitness: float | None = None
    failure_kind: str | None = None
    reason: str = ""
    report: dict | None = field(default=None, repr=False)
    seconds: float = 0.0

    @property
    def passed_gate(self) -> bool:
        return self.gate_score is not None and self.gate_score >= self.gate

    def as_cascade(self) -> dict:
        """The result in ``cascade``'s terms for OpenEvolve: ``combined_score`` is the fitness after stage 2 and
        0.25 x the gate score when stopped at the gate (OpenEvolve's threshold is 0.25 x gate), 0 when invalid."""
        if not self.valid:
            return {"metrics": {"combined_score": 0.0, "valid": 0.0, "passed_gate": 0.0},
                    "artifacts": {"invalid": f"INVALID ({self.failure_kind}): {self.reason}"[:1500],
                                  "failure_kind": self.failure_kind}, "seconds": self.seconds}
        metrics = {"combined_score": self.fitness if self.fitness is not None else 0.25 * self.gate_score,
                   "gate_score": self.gate_score, "valid": 1.0, "gate": self.gate, "passed_gate": float(self.passed_gate)}
        artifacts = {"stage1": f"board score {self.gate_score:.3f} on the gate items; gate {self.gate:.3f} -> "
                               f"{'passed' if self.passed_gate else 'stopped at the gate'}"}
        if self.fitness is not None:
            metrics["dev_overall"] = self.fitness
            artifacts["stage2"] = f"arena dev overall {self.fitness:.3f} (gain over {self.report['best_baseline']}: " \
                                  f"{self.report['gain']})"
        return {"metrics": metrics, "artifacts": artifacts, "seconds": self.seconds}


def candidate_name(source: str) -> str:
    """A candidate's submission name: its source's digest (two candidates of a population never share one)."""
    return "cand-" + hashlib.sha256(source.encode()).hexdigest()[:12]
