"""The arena's judges: ``review(bundle)`` -> novelty 0-5, effectiveness 0-5, soundness 0-3, the reference arena's flags.

Two judges read the same ``Bundle`` (a submission's code, DESCRIPTION.md, metadata, the arena's own dev report and
the earlier entries; never the test items, nothing of the arena's ``private/``):

- ``rules`` (``rules.review_rules``): offline, no network; code similarity (``similarity``, ``references``) and
  behaviour on probe layers and on real board layers the judge draws (``behaviour``, ``numpy_baselines``, ``layers``; a
  method failing on them is flagged ``CRASHED_ON_JUDGE_INPUTS``), DESCRIPTION sections and claimed numbers against the dev
  report (``claims``), effectiveness from the dev report;
- ``openai`` (``llm.LLMJudge``): any OpenAI-compatible endpoint, two model families, a third call breaking ties.

A flag zeroes the submission's points: ``record.record_review`` writes a ``review`` event into the ledger.
"""

from __future__ import annotations

from .bundle import Bundle, BundleError, load_bundle
from .review import FLAGS, Review, ReviewError
from .rules import review_rules

__all__ = ["FLAGS", "Bundle", "BundleError", "Review", "ReviewError", "load_bundle", "review", "review_rules"]


def review(bundle: Bundle, judge: str = "rules", **options) -> Review:
    """Review ``bundle`` with the rule judge (``judge="rules"``; ``layers=``: real board layers from
    ``layers.arena_layers``) or an LLM judge (``"openai"``, see ``llm``)."""
    if judge == "rules":
        return review_rules(bundle, layers=options.get("layers"))
    if judge == "openai":
        from .llm import LLMJudge

        return LLMJudge(**{k: v for k, v in options.items() if k != "layers"}).review(bundle)
    raise ValueError(f"unknown judge {judge!r}; judges: rules, openai")
