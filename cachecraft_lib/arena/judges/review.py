"""A judge's review: the reference arena's three scores, its five flags, notes, and which judge wrote it.

The post's judges scored novelty (0-5), effectiveness (0-5) and soundness (0-3) and could raise five flags;
a flag zeroes the submission's points (``points.py``). ``Review.checked`` refuses anything outside those
ranges or names, so no judge (rule or LLM) can record a score the rules do not know. Notes quote what a
submission holds (a sentence of its DESCRIPTION, its error text) or what an LLM wrote after reading it, so each
note is made safe once, here (``util.terminal_text.safe_text``, at most ``NOTE_MAX`` characters), before it
reaches a terminal, the ledger or a page.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ...util.terminal_text import safe_text

POST_FLAGS = ("MISSTATED_METHOD", "UNDISCLOSED_PRIOR_ART", "FABRICATED_EVIDENCE", "RULE_VIOLATION",
              "MISSING_ATTRIBUTION")
# raised by the rule judge only (it runs the method): failing on the judge's inputs is itself suspicious
RUN_FLAGS = ("CRASHED_ON_JUDGE_INPUTS",)
FLAGS = POST_FLAGS + RUN_FLAGS
RANGES = {"novelty": (0, 5), "effectiveness": (0, 5), "soundness": (0, 3)}
NOTE_MAX = 1000


class ReviewError(ValueError):
    """A review (or a judge's answer) is malformed: the message names the field and what was expected."""


@dataclass(frozen=True)
class Review:
    """Scores, flags and notes of one judge (or of a panel: ``judge`` lists its members)."""

    novelty: int
    effectiveness: int
    soundness: int
    flags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    judge: str = ""
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(safe_text(n, NOTE_MAX) for n in self.notes))

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def total(self) -> int:
        """Novelty + effectiveness + soundness (at most 13); 0 when flagged."""
        return 0 if self.flags else self.novelty + self.effectiveness + self.soundness

    def checked(self) -> Review:
        """This review if every score is an integer in its range and every flag is known; ReviewError otherwise."""
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ReviewError(f"{name} must be an integer from {low} to {high}, got {value!r}")
        unknown = [f for f in self.flags if f not in FLAGS]
        if unknown:
            raise ReviewError(f"flags {unknown} are not known; flags: {', '.join(FLAGS)}")
        return self

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["flags"], out["notes"] = list(self.flags), list(self.notes)
        return out

    def table_row(self) -> dict[str, Any]:
        """One row for a review table (notes joined)."""
        return {"judge": self.judge, "novelty": self.novelty, "effectiveness": self.effectiveness,
                "soundness": self.soundness, "flags": ", ".join(self.flags) or "-", "notes": " | ".join(self.notes)}
