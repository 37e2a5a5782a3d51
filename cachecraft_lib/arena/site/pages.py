"""The site's pages: what each page shows, gathered into plain values, rendered by the Jinja2 templates under
``templates/`` (autoescape on: ``templating``). The index (verification status, boards and their rules), one
page per board (the standing) and one per entry (description, reports, paired comparisons, ledger events).
Only ``markup.markdown`` turns a submission's text into HTML (markdown-it-py, raw HTML off).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from markupsafe import Markup

from ..boards.boards import Board, _budgets_text
from ..scoring import leaderboard
from ..scoring.events import Kind
from ..scoring.pairs import FIELD as PAIRED_FIELD
from .data import SiteData, slug
from .markup import interval_bar, markdown, num
from .status import LedgerStatus
from .templating import render

TERMS = ("accuracy", "memory", "speed", "overhead")
STANDING_HEADERS = ["rank", "entry", "author", "kind", "overall [95%]", "interval", *TERMS, "eligible",
                    "moved the board", "points", "judges N/E/S", "flags"]
LONG_VALUE = 96  # characters of a field shown whole; a longer one (a behaviour sketch: 4,096 hex) is cut


def _page(template: str, check: LedgerStatus, title: str, depth: int = 0, **context: Any) -> str:
    return render(template, check=check, title=title, up="../" * depth, **context)


def rules_rows(board: Board, data: SiteData) -> list[tuple[str, Any]]:
    """A board's rules as (name, value) rows, with the points rule(s) the ledger used on it."""
    weights = ", ".join(f"{k} {v:g}" for k, v in board.weights.items() if v or k != "generated_length")
    limits = f"{board.limits.mode}: accuracy >= {board.limits.accuracy:g}, memory + speed >= " \
             f"{board.limits.efficiency:g}"
    used = sorted({str(p.get("rule")) for p in map(leaderboard.payload, data.events)
                   if p.get("board") == board.name and p.get("rule") is not None})
    seen = sorted({str(p.get("rules_version")) for e in data.events if e.get("kind") in leaderboard.SCORED
                   for p in [leaderboard.payload(e)] if p.get("board") == board.name and "rules_version" in p})
    version = f"{board.rules_version}" + (f" (entries scored under {', '.join(seen)})" if seen and seen !=
                                          [str(board.rules_version)] else "")
    return [("setting", board.setting), ("budgets (kept)", _budgets_text(board)), ("weights", weights),
            ("eligibility limits", limits), ("gate threshold", f"{board.gate_threshold:g}"),
            ("overhead allowance", "-" if board.overhead_allowance is None else f"{board.overhead_allowance:g}x "
                                                                                "prefill"),
            ("items per task (dev/test)", f"{board.items['dev']}/{board.items['test']}"),
            ("baselines", ", ".join(board.baselines)), ("points rule in force", ", ".join(used) or "no points yet"),
            ("rules version", version), ("model note", board.label)]


def index_page(check: LedgerStatus, data: SiteData, published: str | None = None) -> str:
    rule_versions = sorted({str(e.get("rules_version")) for e in data.events if e.get("rules_version")})
    boards = [{"name": name, "count": len(standing), "description": b.description if (b := data.boards.get(name))
               else "", "rules": rules_rows(b, data) if b else None} for name, standing in data.standings.items()]
    return _page("index.html.j2", check, "CacheCraft arena", profile=data.profile, published=published,
                 rule_versions=", ".join(rule_versions), boards=boards)


def _scale(standing: pd.DataFrame) -> tuple[float, float]:
    values = pd.concat([standing.lo, standing.hi, standing.overall]).dropna().astype(float)
    if values.empty:
        return 0.0, 1.0
    pad = 0.02 * max(1e-9, values.max() - values.min())
    return min(0.0, values.min() - pad), values.max() + pad


def standing_rows(standing: pd.DataFrame) -> list[dict[str, Any]]:
    """One row of values per entry of the board's standing (the template formats and escapes them)."""
    scale = _scale(standing)
    rows = []
    for _, r in standing.iterrows():
        flags = r.get("flags") or ""
        judged = None if pd.isna(r.get("novelty")) else {k: r.get(k) for k in leaderboard.JUDGED}
        classes = " ".join(c for c in ("entry", r.kind, "flagged" if flags else "",
                                       "" if r.eligible else "ineligible") if c)
        rows.append({"rank_lo": int(r.rank_lo), "rank_hi": int(r.rank_hi), "slug": slug(r.board, r["name"]),
                     "name": r["name"], "author": r.author, "kind": r.kind, "overall": r.overall, "lo": r.lo,
                     "hi": r.hi, "bar": interval_bar(r.overall, r.lo, r.hi, scale), "terms": [r[t] for t in TERMS],
                     "eligible": bool(r.eligible), "moved": bool(r.moved), "points": r.points, "judged": judged,
                     "flags": flags, "classes": classes})
    return rows


def fallback_names(standing: pd.DataFrame) -> list[str] | None:
    """The entries whose rank is not wholly from paired differences (the ledger records no comparison for some of
    their pairs, an older ledger, and the site was built without the organiser's per-unit values); None for an
    empty board."""
    if standing.empty or "rank_basis" not in standing:
        return None
    return [str(n) for n in standing[standing.rank_basis != leaderboard.PAIRED]["name"]]


def board_page(check: LedgerStatus, data: SiteData, name: str) -> str:
    standing = data.standings[name]
    looks = leaderboard.test_looks(data.events)  # every evaluation on test items, per author (issue 49)
    looks = looks[looks.board == name]
    rejected = leaderboard.rejections(data.events)
    rejected = rejected[rejected.board == name]
    return _page("board.html.j2", check, f"Board {name}", depth=1, name=name, headers=STANDING_HEADERS,
                 rows=standing_rows(standing), basis=fallback_names(standing),
                 looks=[(r.author, r.looks) for r in looks.itertuples()],
                 plan_looks=plan_looks_section(data.events, name),
                 rejected=[r.to_dict() for _, r in rejected.iterrows()])


def plan_looks_section(events: list[dict], board: str) -> str:
    """Test looks per pre-registered plan and random seed, counted as the plan's claim counts them
    (``leaderboard.test_looks_by_plan``), where the board has a plan or a look that names one: a plan, and its
    family (board, seed program, random seed), should show exactly one look per seed, and the claim's family
    over all seeds (author, board, seed program, round) no more than its first plan's seeds (flagged above them:
    five one-seed plans are five looks for one registered seed); looks after the entry and other authors' looks
    tagged with the plan are shown apart; the looks no plan holds are one row. Empty when no plan shows."""
    looks = leaderboard.test_looks_by_plan(events)
    looks = looks[looks.board == board]
    if (looks.plan == leaderboard.NO_PLAN).all():
        return Markup("")
    rows = [{"plan": r.plan, "family": r.family, "seed": None if pd.isna(r.random_seed) else int(r.random_seed),
             "looks": r.looks, "looks_note": _looks_note(r),
             "family_looks": None if pd.isna(r.family_looks) else int(r.family_looks),
             "after": r.after, "foreign": r.foreign, "authors": r.authors, "names": r.names, "note": r.note,
             "family_total": None if r.plan == leaderboard.NO_PLAN or pd.isna(r.family_seeds) else int(r.family_total),
             "family_seeds": None if pd.isna(r.family_seeds) else int(r.family_seeds)} for r in looks.itertuples()]
    return Markup(render("plan_looks.html.j2", rows=rows))  # safe: a rendered, autoescaped template


def _looks_note(r: Any) -> str:
    """Which warning a plan's look count carries (the template words it)."""
    if r.plan == leaderboard.NO_PLAN:
        return ""
    if r.looks > 1:
        return "more"
    if r.family and r.family_looks > 1:
        return "family"
    return "none" if r.looks == 0 else ""


def claim_text(events: list[dict], entry: dict | None) -> str:
    """A search entry's pre-registration as a referee should read it: the claim's verdict
    (``arena.scoring.claims.claim_verdict``: against the ledger, not its run), not the bare label of its origin."""
    from ..scoring.claims import claim_verdict

    origin = leaderboard.payload(entry or {}).get("origin")
    if not isinstance(origin, dict) or not origin.get("registration"):
        return Markup("")
    registration = origin.get("registration")
    verdict = claim_verdict(events, entry) if registration == "preregistered" else None
    return Markup(render("claim.html.j2", registration=registration, verdict=verdict))  # safe: autoescaped


def report_cells(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A payload as the report shows it: numbers formatted, lists and dicts as JSON, long text cut to its start
    and length (``LONG_VALUE``), None a dash. The ``paired`` record has its own table."""
    cells = []
    for field, item in data.items():
        if field == PAIRED_FIELD:
            continue
        text = num(item) if isinstance(item, float) else None if item is None else \
            json.dumps(item) if isinstance(item, list | dict) else str(item)
        cells.append({"field": field, "text": text, "cut": text is not None and len(text) > LONG_VALUE,
                      "length": len(text) if text is not None else 0})
    return cells


SUMMARY = ("overall", "points", "rule", "judge", "flags", "kind", "message")


def event_rows(events: list[dict]) -> list[dict[str, Any]]:
    rows = []
    for e in events:
        p = leaderboard.payload(e)
        summary = [(k, p[k]) for k in SUMMARY if k in p and not isinstance(p[k], list | dict)]
        rows.append({"seq": e.get("seq"), "time": e.get("time"), "kind": e.get("kind"), "summary": summary,
                     "hash": str(e.get("hash", ""))[:16]})
    return rows


def paired_rows(data: SiteData, row: pd.Series) -> list[dict[str, Any]]:
    """The entry's paired difference with each other entry of its board as the ledger records it (in its own
    payload or in the later entry's: ``scoring.pairs.recorded``), in the standing's order."""
    from ..scoring.pairs import recorded

    pairs = recorded(data.events)
    mine = (row.get("round") if pd.notna(row.get("round")) else 1, row.get("entry_id"))
    out = []
    for _, other in data.standings.get(row.board, pd.DataFrame()).iterrows():
        theirs = (other.get("round") if pd.notna(other.get("round")) else 1, other.get("entry_id"))
        if theirs != mine and (mine, theirs) in pairs:
            d = pairs[(mine, theirs)]
            out.append({"name": other["name"], "diff": d.point, "lo": d.lo, "hi": d.hi, "per_task": d.n})
    return out


def entry_page(check: LedgerStatus, data: SiteData, row: pd.Series) -> str:
    events = data.entry_events(row.board, row["name"])
    scored = [leaderboard.payload(e) for e in events if e.get("kind") in leaderboard.SCORED]
    latest = scored[-1] if scored else {}
    claim = claim_text(data.events, next((e for e in reversed(events) if e.get("kind") == Kind.SUBMISSION), None))
    texts = data.texts.get(latest.get("code_sha256"))
    return _page("entry.html.j2", check, f"{row['name']} on board {row.board}", depth=1,
                 row={**row.to_dict(), "flags": row.get("flags") or ""}, claim=claim,
                 description=markdown(texts.description) if texts and texts.description is not None else None,
                 has_texts=texts is not None, code_sha256=latest.get("code_sha256"),
                 dev_report=json.dumps(texts.dev_report, indent=1) if texts and texts.dev_report else None,
                 paired=paired_rows(data, row),
                 report=report_cells(latest) if latest else [], events=event_rows(events))
