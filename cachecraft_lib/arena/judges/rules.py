"""The offline rule judge: no network, no model; every score follows from a rule stated here.

- **Novelty** (0-2; 3-5 need a judge that reads the idea): the closest known code (``references``: KVPress's
  baseline presses via ``inspect``, their numpy forms, this project's presses, earlier entries of other
  authors) by normalised-token similarity (``similarity``). At least ``COPY`` (``COPY_SHORT`` when either side
  has fewer than ``SHORT`` tokens: in a one-liner a few shared tokens move the ratio), or a padded copy (the
  reference's tokens ``covered`` at least ``COPY_COVERED``), is a copy: novelty 0; at least ``CLOSE``: 1;
  otherwise 2. Distance from known code shows the code is not a copy, not that its idea is new.
  Behaviour (``behaviour``: the method run in the sandbox on seeded probe layers and on real board layers the
  judge draws, ``layers``) settles what tokens cannot: keeping at least ``SAME`` of what a baseline's form
  keeps, on either set of layers, is a copy whatever the code (a rewrite with other operations, or one that
  behaves otherwise only on the probes); keeping less than ``DIFFERENT`` on both of what the form of the method
  its tokens resemble keeps is not a copy (a sign flip reads like K-norm and is its opposite). The method runs
  through every prefill hook it declares (``score``/``keep``, with probe queries when it declares probes;
  ``whole_cache`` per context when a board it names runs it), so no hook hides a copy. A copy whose metadata
  asks for ``allocation: head_adaptive`` is that method under Ada-KV: its DESCRIPTION must name both.
- **CRASHED_ON_JUDGE_INPUTS**: the method fails (crash, timeout, memory, an invalid answer) on the judge's probe
  or real layers, where a board's layers would not make it fail: hiding its behaviour from the judge is not
  allowed, and a method that is merely fragile would fail on a board too.
- **Flags for a copy**: a copy of a published method (a baseline) that the DESCRIPTION does not name raises
  ``UNDISCLOSED_PRIOR_ART``, not ``MISSTATED_METHOD``. Why: what the rule judge establishes is that the code
  *is* a published method (identity of code with a known source) and that the description never names that
  source; whether the prose misdescribes what the code does is a reading of meaning it cannot do (the LLM
  judge's ``MISSTATED_METHOD``). A renamed baseline presented as new is exactly prior art left undisclosed.
  A copy of an earlier arena entry by another author that the DESCRIPTION does not name raises
  ``MISSING_ATTRIBUTION`` (the reference arena: a DESCRIPTION names "any arena implementation it builds on"). A copy that
  names its source is honest: novelty 0, no flag. (The gate alone does not stop a copy: a renamed SnapKV run
  in the sandbox beats KVPress's SnapKV by its uncounted compression overhead, +0.0007 on the smoke profile.)
  The author's own earlier code (same ``author``, e.g. CacheCraft's FRC press for the FRC entry) is not copying.
- **RULE_VIOLATION**: ``method.py`` breaks the submission rules (imports outside the allowed list, network,
  file or process access: ``submission``'s checks). A submission that is merely broken (no ``Method``, bad
  metadata) is noted, not flagged: the harness refuses it anyway.
- **Soundness** (0-3): +1 every required section present with text; +1 the Evidence states at least one number
  about the dev run and all of them match the dev report (``claims``); +1 Limitations and Relation to prior work
  each say something (at least ``MIN_WORDS`` words). A claimed number that matches nothing raises
  ``FABRICATED_EVIDENCE`` and soundness is 0.
- **Effectiveness** (0-5) from the dev report: the method's accuracy (normalised to the full cache) over the best
  baseline's: < 0.8 (the embedded eligibility limit) 0; < 0.9 1; < 0.97 2; < 1.0 3; at least 1.0 4; 5 when
  also the paired 95% interval of its overall gain over that baseline lies above 0. No dev report: 0, noted.
- Prior art beyond this repository: "not assessed offline" (no web search), always in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..submissions import folder as submission
from ..submissions.folder import SubmissionError, check_metadata
from . import numpy_baselines
from .behaviour import DIFFERENT, SAME, measure
from .bundle import Bundle
from .claims import check_claims, missing_sections, sections
from .references import PUBLISHED, Reference, entry_reference, known_code
from .review import Review
from .similarity import covered, normalise, similarity

JUDGE_ID = "rules-1"
ADA_KV = "Ada-KV"  # the allocation ``allocation: head_adaptive`` applies (KVPress's AdaKVPress)
COPY, COPY_COVERED, CLOSE = 0.70, 0.95, 0.55
SHORT, COPY_SHORT = 60, 0.90  # under 60 normalised tokens a few shared tokens move the ratio: ask for 0.9
MIN_COVERED_TOKENS = 40  # a padded copy must contain a reference of some size, not a one-liner
NOVELTY_CAP = 2
MIN_WORDS = 15
NOT_ASSESSED = "prior art beyond this repository: not assessed offline (no web search)"


@dataclass(frozen=True)
class Match:
    """A reference and how close the submission's code is to it."""

    reference: Reference
    similarity: float
    covered: float

    code_tokens: int = 0

    @property
    def copy(self) -> bool:
        ref_tokens = len(normalise(self.reference.source))
        threshold = COPY_SHORT if min(ref_tokens, self.code_tokens) < SHORT else COPY
        return self.similarity >= threshold or (ref_tokens >= MIN_COVERED_TOKENS and self.covered >= COPY_COVERED)


def closest(bundle: Bundle) -> tuple[list[Match], list[Match]]:
    """Matches to other authors' code, best first, and to the author's own earlier code (not counted)."""
    refs = list(known_code()) + [entry_reference(e.name, e.author, e.code) for e in bundle.earlier if e.code]
    others, own = [], []
    for ref in refs:
        match = Match(ref, similarity(ref.source, bundle.code), covered(ref.source, bundle.code),
                      len(normalise(bundle.code)))
        (own if ref.author == bundle.author else others).append(match)
    key = lambda m: (m.copy, m.similarity)  # noqa: E731
    return sorted(others, key=key, reverse=True), sorted(own, key=key, reverse=True)


def _copied(bundle: Bundle, others: list[Match], acts: dict[str, float], notes: list[str]) -> Reference | None:
    """The reference the code copies, by tokens or by behaviour; a behaviour that differs overrules the tokens."""
    top = others[0] if others else None
    form = {v: k for k, v in numpy_baselines.METHOD.items()}
    if top is not None and top.copy:
        key = form.get(top.reference.method)
        if key in acts and acts[key] < DIFFERENT:
            notes.append(f"reads like {top.reference.method} (token similarity {top.similarity:.2f}) but keeps other "
                         f"tokens (overlap {acts[key]:.2f} with its form): not a copy")
            return None
        notes.append(f"the code is a copy of {_what(top.reference)} (token similarity {top.similarity:.2f}, "
                     f"covered {top.covered:.2f})")
        return top.reference
    same = [k for k, v in sorted(acts.items(), key=lambda kv: -kv[1]) if v >= SAME]
    if same:
        ref = next(r for r in known_code() if r.name == f"arena form of {numpy_baselines.METHOD[same[0]]}")
        notes.append(f"the method behaves as {_what(ref)}: it keeps {acts[same[0]]:.2f} of the entries that form "
                     "keeps on the judge's layers, whatever its code")
        return ref
    return None


def _published(method: str) -> Reference:
    """A published method as a reference without code (its aliases disclose it)."""
    aliases, author = PUBLISHED[method]
    return Reference(method, method, "baseline", author, "", aliases)


def _what(ref: Reference) -> str:
    return f"{ref.name} ({ref.method}{', ' + ref.author if ref.kind != 'entry' else ' by ' + ref.author})"


def _novelty(bundle: Bundle, notes: list[str], flags: list[str], details: dict, probe: bool,
             layers: list | None = None) -> int:
    try:
        others, own = closest(bundle)
    except SyntaxError as err:
        notes.append(f"novelty: method.py does not parse ({err.msg}); not comparable")
        return 0
    details["closest"] = [{"reference": m.reference.name, "method": m.reference.method, "kind": m.reference.kind,
                           "similarity": round(m.similarity, 3), "covered": round(m.covered, 3)} for m in others[:5]]
    if own:
        notes.append(f"the author's own earlier code is not counted: closest {own[0].reference.name} "
                     f"(similarity {own[0].similarity:.2f})")
    acts: dict[str, float] = {}
    if probe:
        measured = measure(bundle, layers)
        acts = measured.overlap
        details["behaviour"] = acts
        details["behaviour_by_layers"] = measured.by_layers
        notes.append(measured.note)
        if measured.failed:
            flags.append("CRASHED_ON_JUDGE_INPUTS")
    ref = _copied(bundle, others, acts, notes)
    if ref is not None:
        disclosed = ref.disclosed_in(bundle.description)
        if bundle.metadata.get("allocation") == "head_adaptive":  # the harness wraps the scores in AdaKVPress
            notes.append(f"its metadata asks for head-adaptive budgets: {ref.method} under Ada-KV "
                         f"({ADA_KV}, {PUBLISHED[ADA_KV][1]})")
            disclosed = disclosed and _published(ADA_KV).disclosed_in(bundle.description)
        notes.append("novelty 0: a copy; " + ("its DESCRIPTION names it" if disclosed
                                              else "its DESCRIPTION never names it"))
        if not disclosed:
            flags.append("MISSING_ATTRIBUTION" if ref.kind == "entry" else "UNDISCLOSED_PRIOR_ART")
        return 0
    if not others:
        return NOVELTY_CAP
    top = others[0]
    close = top.similarity >= CLOSE or max(acts.values(), default=0.0) >= DIFFERENT
    novelty = 1 if close else NOVELTY_CAP
    notes.append(f"novelty {novelty}: closest known code {_what(top.reference)}, token similarity "
                 f"{top.similarity:.2f} (copy from {COPY:.2f}); at most {NOVELTY_CAP} offline")
    return novelty


VIOLATIONS = ("network", "file_access", "bad_import")  # submission kinds that break the rules (not just a bug)


def _rule_violations(bundle: Bundle, notes: list[str], flags: list[str]) -> None:
    code = bundle.code.encode("utf-8")
    try:
        boards = bundle.metadata.get("boards") or ()  # the hooks the named boards call (decode, whole_cache, ...)
        submission.check_code_hooks(code, (boards,) if isinstance(boards, str) else tuple(boards))
    except SubmissionError as err:
        if err.kind in VIOLATIONS:
            flags.append("RULE_VIOLATION")
            notes.append(f"rule violation: {err}")
        else:
            notes.append(f"the submission would be refused: {err}")
    try:
        check_metadata(dict(bundle.metadata))
    except SubmissionError as err:
        notes.append(f"the submission would be refused: {err}")


def _soundness(bundle: Bundle, notes: list[str], flags: list[str], details: dict) -> int:
    missing = missing_sections(bundle.description)
    points = 0 if missing else 1
    if missing:
        notes.append(f"soundness: DESCRIPTION.md lacks or leaves empty {missing}")
    found = sections(bundle.description)
    thin = [s for s in ("Limitations", "Relation to prior work") if len(found.get(s.lower(), "").split()) < MIN_WORDS]
    points += 0 if thin else 1
    if thin:
        notes.append(f"soundness: {thin} say too little (fewer than {MIN_WORDS} words)")
    if bundle.dev_report is None:
        notes.append("soundness: no dev report, the numbers DESCRIPTION.md claims are not checked")
        return points
    claims = check_claims(bundle.description, bundle.dev_report)
    details["claims"] = [{"term": c.term, "value": c.value, "tolerance": c.tolerance, "method": c.method,
                          "matched": c.matched, "measured": [round(m, 4) for m in c.measured]} for c in claims]
    false = [c for c in claims if not c.matched]
    if false:
        flags.append("FABRICATED_EVIDENCE")
        for c in false:
            near = ", ".join(f"{m:.3f}" for m in c.measured) or "nothing"
            notes.append(f"fabricated evidence: '{c.sentence[:120]}' claims {c.term} {c.value:g} (+/- {c.tolerance:g})"
                         f"; the dev report has {near}")
        return 0
    if claims:
        notes.append(f"soundness: {len(claims)} claimed number(s) match the dev report")
        return points + 1
    notes.append("soundness: the Evidence states no number about the dev run to check")
    return points


def _effectiveness(bundle: Bundle, notes: list[str]) -> int:
    report = bundle.dev_report
    if report is None:
        notes.append("effectiveness 0: no dev report (run `cachecraft arena judge DIR --board BOARD --run-dev`)")
        return 0
    scores, best = report.get("scores", {}), report.get("best_baseline")
    mine = scores.get(report.get("method") or bundle.name)
    if mine is None or best not in scores:
        notes.append(f"effectiveness 0: the dev report has no row for {bundle.name!r} or for its best baseline")
        return 0
    ratio = float(mine["accuracy"]) / max(float(scores[best]["accuracy"]), 1e-12)
    value = next((i for i, bound in enumerate((0.8, 0.9, 0.97, 1.0)) if ratio < bound), 4)
    gain = report.get("gain") or {}
    resolved = gain.get("lo") is not None and float(gain["lo"]) > 0
    if value == 4 and resolved:
        value = 5
    notes.append(f"effectiveness {value}: dev accuracy {float(mine['accuracy']):.3f} = {ratio:.2f} x the best "
                 f"baseline's ({best}, {float(scores[best]['accuracy']):.3f}); overall gain "
                 + (f"{gain['point']:+.3f} [{gain['lo']:+.3f}, {gain['hi']:+.3f}]" if gain else "unknown")
                 + (" (resolved)" if resolved else " (not resolved above 0)"))
    return value


def review_rules(bundle: Bundle, probe: bool = True, layers: list | None = None) -> Review:
    """The rule judge's review of ``bundle`` (see the module doc for every rule); ``probe=False`` skips running
    the method (``behaviour``), leaving code similarity alone to find copies; ``layers``: real board layers
    (``layers.board_layers`` / ``arena_layers``) beside the synthetic probes."""
    notes: list[str] = []
    flags: list[str] = []
    details: dict = {}
    _rule_violations(bundle, notes, flags)
    novelty = _novelty(bundle, notes, flags, details, probe, layers)
    soundness = _soundness(bundle, notes, flags, details)
    effectiveness = _effectiveness(bundle, notes)
    notes.append(NOT_ASSESSED)
    return Review(novelty, effectiveness, soundness, tuple(dict.fromkeys(flags)), tuple(notes), JUDGE_ID,
                  details).checked()
