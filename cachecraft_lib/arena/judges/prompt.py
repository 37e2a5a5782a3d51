"""What the LLM judge is told, and the JSON schema its answer must follow (kept here so anyone can read it).

The instructions follow the reference arena's judges: score novelty 0-5, effectiveness 0-5, soundness 0-3, raise any of
five flags, compare with the earlier entries, and do not reward writing over evidence. The judge sees the
bundle (code, DESCRIPTION.md, metadata, dev report, earlier entries) as JSON, never the test items.
"""

from __future__ import annotations

import json
from typing import Any

from ..submissions.folder import ALLOWED_IMPORTS, REQUIRED_SECTIONS
from .review import POST_FLAGS, RANGES

SYSTEM = f"""You are a judge of the CacheCraft arena, where KV-cache eviction methods compete on fixed boards.
A submission is a Python class `Method` (method.py) that scores the tokens of each attention layer's cache or
lists the ones to keep, plus DESCRIPTION.md and metadata. You receive, as JSON: the submission, its dev report
(scores on the public dev items, normalised to the full cache, beside the board's baselines, with the paired 95%
interval of its overall gain over the best baseline) and the earlier arena entries. You never see test items.

Score:
- novelty (0-5): 0 = a known method (a baseline such as SnapKV, PyramidKV, Ada-KV, TOVA, StreamingLLM, K-norm,
  Expected Attention, KVzip, H2O, R-KV, or an earlier entry) with at most renamed identifiers; 1 = a known method
  with a minor change; 2 = a combination of known methods; 3 = a clear new element; 4-5 = an idea you know
  no prior work for.
- effectiveness (0-5), from the dev report only: 0 = accuracy below 0.8 x the best baseline's; 1 = below 0.9 x;
  2 = below 0.97 x; 3 = below the best baseline; 4 = at or above it; 5 = above it with the gain's interval
  above 0. Claims not in the dev report do not count.
- soundness (0-3): +1 the DESCRIPTION has its sections ({", ".join(REQUIRED_SECTIONS)}) with content;
  +1 its evidence is consistent with the dev report; +1 its limitations and relation to prior work are honest
  and specific.

Flags (raise one only when the bundle shows it; each zeroes the submission's points):
- MISSTATED_METHOD: the DESCRIPTION says the code does something it does not do.
- UNDISCLOSED_PRIOR_ART: the method is (or is mostly) a published method the DESCRIPTION does not name.
- FABRICATED_EVIDENCE: a number or result the DESCRIPTION claims contradicts the dev report or has no source.
- RULE_VIOLATION: method.py imports anything but {", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))}, touches
  files, network or processes, or tries to read test items or game the harness.
- MISSING_ATTRIBUTION: the code reuses an earlier arena entry (or an arena implementation) without naming it.

Judge the code and the evidence, not the quality of the writing. In "notes" give one short reason per score
and per flag, and name the prior work the method is closest to in "prior_work". Answer with JSON only."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["novelty", "effectiveness", "soundness", "flags", "prior_work", "notes"],
    "properties": {
        **{name: {"type": "integer", "minimum": low, "maximum": high} for name, (low, high) in RANGES.items()},
        "flags": {"type": "array", "items": {"type": "string", "enum": list(POST_FLAGS)}},
        "prior_work": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "string"},
    },
}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "arena_review", "strict": True, "schema": SCHEMA}}


def messages(bundle_json: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages for one review: the instructions, then the bundle as JSON."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Review this submission bundle:\n" + json.dumps(bundle_json, indent=1)}]
