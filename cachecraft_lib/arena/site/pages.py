"""The site's pages as HTML strings: the index (verification status, boards and their rules), one page per
board (the standing) and one per entry (description, reports, ledger events). Every value goes through
``markup.esc``/``markup.num``; only ``markup.markdown`` turns a submission's text into HTML (markdown-it-py,
raw HTML off).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ..boards.boards import Board, _budgets_text
from ..scoring import leaderboard
from .data import SiteData, slug
from .markup import esc, interval_bar, markdown, num, page, table
from .status import LedgerStatus

TERMS = ("accuracy", "memory", "speed", "overhead")


def banner(check: LedgerStatus) -> str:
    """Shown on every page of a ledger that does not verify."""
    if check.clean:  # verified, or signed with the key not pinned (the status block says which)
        return ""
    shown = (f"Only the {check.count} event(s) before the first bad line are shown" if check.status == "chain"
             else f"Its {check.count} event(s) are shown unverified")
    return (f'<div class="tampered" id="tampered"><strong>LEDGER DOES NOT VERIFY.</strong> {esc(check.message)}. '
            f"{shown}; they are not a clean board.</div>")


def status_block(check: LedgerStatus, published: str | None = None) -> str:
    state = check.state  # "verified" only against a pinned key (status.check_ledger)
    rows = [["hash chain", f'<span class="status-{"ok" if check.clean else "bad"}" id="chain-status">{esc(state)}</span>'],
            ["details", esc(check.message)], ["events", esc(check.count)],
            ["head (last hash)", f"<code id=\"head\">{esc(check.head)}</code>"], ["head file", esc(check.head_file)],
            ["signatures", esc(check.signatures)], ["ledger", f"<code>{esc(check.path.name)}</code>"]]
    if published:
        rows.append(["signed head", f'<a href="{esc(published)}">{esc(published)}</a> (publish it with the site)'])
    return "<section><h2>Ledger verification</h2>" + table(["check", "result"], rows, "status") + "</section>"


def rules_rows(board: Board, data: SiteData) -> list[list[str]]:
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
    pairs = [("setting", board.setting), ("budgets (kept)", _budgets_text(board)), ("weights", weights),
             ("eligibility limits", limits), ("gate threshold", f"{board.gate_threshold:g}"),
             ("overhead allowance", "-" if board.overhead_allowance is None else f"{board.overhead_allowance:g}x "
                                                                                    "prefill"),
             ("items per task (dev/test)", f"{board.items['dev']}/{board.items['test']}"),
             ("baselines", ", ".join(board.baselines)), ("points rule in force", ", ".join(used) or "no points yet"),
             ("rules version", version), ("model note", board.label)]
    return [[esc(k), esc(v)] for k, v in pairs]


def index_page(check: LedgerStatus, data: SiteData, published: str | None = None) -> str:
    rule_versions = sorted({str(e.get("rules_version")) for e in data.events if e.get("rules_version")})
    parts = [f"<h1>CacheCraft arena: {esc(data.profile or 'unknown profile')}</h1>", status_block(check, published),
             f"<p>Ledger rules: {esc(', '.join(rule_versions) or '-')}. Scores are on hidden test items; brackets "
             "and bars are 95% intervals over test units; ranks are ranges: entries share a rank where the 95% "
             "interval of their paired difference over test units includes 0.</p>"]
    for name, standing in data.standings.items():
        board = data.boards.get(name)
        rules = table(["rule", "value"], rules_rows(board, data), "rules") if board else \
            "<p>No board data for this board in the profile named by the ledger.</p>"
        parts.append(f'<section class="board" id="board-{esc(name)}"><h2><a href="boards/{esc(name)}.html">Board '
                     f"{esc(name)}</a> ({len(standing)} entries)</h2>{esc(board.description if board else '')}"
                     f"{rules}</section>")
    return page("CacheCraft arena", "\n".join(parts), banner(check))


def _scale(standing: pd.DataFrame) -> tuple[float, float]:
    values = pd.concat([standing.lo, standing.hi, standing.overall]).dropna().astype(float)
    if values.empty:
        return 0.0, 1.0
    pad = 0.02 * max(1e-9, values.max() - values.min())
    return min(0.0, values.min() - pad), values.max() + pad


def rank_text(row: pd.Series) -> str:
    lo, hi = int(row.rank_lo), int(row.rank_hi)
    return f'<span class="rank">{lo}</span>' if lo == hi else f'<span class="rank">{lo}&ndash;{hi}</span>'


def standing_rows(standing: pd.DataFrame) -> tuple[list[list[str]], list[str]]:
    scale = _scale(standing)
    rows, classes = [], []
    for _, r in standing.iterrows():
        flags = r.get("flags") or ""
        judged = "" if pd.isna(r.get("novelty")) else f"{num(r.novelty, 0)}/{num(r.effectiveness, 0)}/" \
                                                         f"{num(r.soundness, 0)} ({esc(r.get('judge'))})"
        rows.append([rank_text(r), f'<a href="../entries/{esc(slug(r.board, r["name"]))}">{esc(r["name"])}</a>',
                     esc(r.author), esc(r.kind), f"{num(r.overall)} <small>[{num(r.lo)}, {num(r.hi)}]</small>",
                     interval_bar(r.overall, r.lo, r.hi, scale), *[num(r[t]) for t in TERMS],
                     "yes" if r.eligible else "no", "yes" if bool(r.moved) else "no", num(r.points, 1), judged,
                     f'<span class="flag">FLAGGED: {esc(flags)}</span>' if flags else ""])
        classes.append(" ".join(c for c in ("entry", r.kind, "flagged" if flags else "",
                                            "" if r.eligible else "ineligible") if c))
    return rows, classes


def rank_basis_note(standing: pd.DataFrame) -> str:
    """Says which entries' ranks are not from paired differences: the ledger records no comparison for them (an
    older ledger) and the site was built without the organiser's per-unit values."""
    if standing.empty or "rank_basis" not in standing:
        return ""
    fallback = standing[standing.rank_basis != leaderboard.PAIRED]
    if fallback.empty:
        return ('<p class="rank-basis" id="rank-basis">Ranks from the paired differences over test units '
                "(recorded in the ledger by the organiser).</p>")
    names = ", ".join(esc(n) for n in fallback["name"])
    return ('<p class="rank-basis fallback" id="rank-basis"><strong>Ranks partly fall back to overlapping overall '
            f"intervals</strong> for {names}: the ledger records no paired comparison for some of their pairs (a "
            "ledger from before entries recorded them) and this site was built without the organiser's per-unit "
            "values, so those ranks may be wider than the organiser's.</p>")


def board_page(check: LedgerStatus, data: SiteData, name: str) -> str:
    standing = data.standings[name]
    rows, classes = standing_rows(standing)
    headers = ["rank", "entry", "author", "kind", "overall [95%]", "interval", *TERMS, "eligible", "moved the board",
               "points", "judges N/E/S", "flags"]
    body = f"<h1>Board {esc(name)}</h1>" + (table(headers, rows, "standing", classes) if rows else
                                             "<p>No entries yet.</p>") + rank_basis_note(standing)
    looks = leaderboard.test_looks(data.events)  # every evaluation on test items, per author (issue 49)
    looks = looks[looks.board == name]
    if not looks.empty:
        body += "<h2>Test looks per author</h2>" + table(
            ["author", "evaluations on the test items"], [[esc(r.author), esc(r.looks)] for r in looks.itertuples()],
            "test-looks")
    body += plan_looks_section(data.events, name)
    rejected = leaderboard.rejections(data.events)
    rejected = rejected[rejected.board == name]
    if not rejected.empty:
        body += "<h2>Rejected submissions</h2>" + table(
            ["entry", "author", "why", "message", "time"],
            [[esc(r["name"]), esc(r.author), esc(r.kind), esc(r.message), esc(r.time)] for _, r in rejected.iterrows()],
            "rejections")
    return page(f"Board {name}", body, banner(check), depth=1)


def plan_looks_section(events: list[dict], board: str) -> str:
    """Test looks per pre-registered plan and random seed, counted as the plan's claim counts them
    (``leaderboard.test_looks_by_plan``), where the board has a plan or a look that names one: a plan, and its
    family (board, seed program, random seed), should show exactly one look per seed, and the claim's family
    over all seeds (author, board, seed program, round) no more than its first plan's seeds; looks after the entry and
    other authors' looks tagged with the plan are shown apart; the looks no plan holds are one row."""
    looks = leaderboard.test_looks_by_plan(events)
    looks = looks[looks.board == board]
    if (looks.plan == leaderboard.NO_PLAN).all():
        return ""
    rows = [[f"<code>{esc(r.plan)}</code>", esc(r.family), "-" if pd.isna(r.random_seed) else esc(int(r.random_seed)),
             esc(r.looks) + _looks_note(r), esc(r.after) + (" <small>(after the entry)</small>" if r.after else ""),
             esc(r.foreign) + (" <small>(other authors, other programs: not counted)</small>" if r.foreign else ""),
             _family_total(r), esc(r.authors), esc(r.names), esc(r.note)] for r in looks.itertuples()]
    return "<h2>Test looks per plan</h2>" + table(
        ["plan", "family", "random seed", "evaluations on the test items (up to the entry)", "after the entry",
         "tagged by others", "family over its seeds (looks / first plan's seeds)", "authors", "entries", "note"],
        rows, "plan-looks")


def _family_total(r: Any) -> str:
    """The looks of every plan and seed of the row's family (author, board, seed program, round) against the
    seeds its first plan registered (``plan_looks.first_of_family``), flagged above them: five one-seed plans
    are five looks for one registered seed."""
    if r.plan == leaderboard.NO_PLAN or pd.isna(r.family_seeds):
        return "-"
    text = f"{int(r.family_total)} / {int(r.family_seeds)}"
    if r.family_total > r.family_seeds:
        return text + (' <span class="flag">MORE LOOKS THAN ITS FIRST PLAN\'S SEEDS: later plans of the family '
                       "(author, board, seed program, round) add no seeds</span>")
    return text


def _looks_note(r: Any) -> str:
    if r.plan == leaderboard.NO_PLAN:
        return ""
    if r.looks > 1:
        return ' <span class="flag">MORE THAN ONE LOOK: a plan has one per seed</span>'
    if r.family and r.family_looks > 1:
        return (f' <span class="flag">MORE THAN ONE LOOK IN ITS FAMILY ({int(r.family_looks)}): plans differing only '
                "in notes or split seed are one chance per seed</span>")
    return " <small>(not submitted, or recorded before looks named their plan)</small>" if r.looks == 0 else ""


def claim_text(events: list[dict], entry: dict | None) -> str:
    """A search entry's pre-registration as a referee should read it: the claim's verdict
    (``arena.scoring.claims.claim_verdict``: against the ledger, not its run), not the bare label of its origin."""
    from ..scoring.claims import claim_verdict

    origin = leaderboard.payload(entry or {}).get("origin")
    if not isinstance(origin, dict) or not origin.get("registration"):
        return ""
    if origin.get("registration") != "preregistered":
        return f"<p>Registration: <strong>{esc(origin.get('registration'))}</strong> (no confirmatory evidence).</p>"
    verdict = claim_verdict(events, entry)
    state = "holds" if verdict.holds else '<span class="flag">FAILS</span>'
    return (f"<p>Pre-registration claim: <strong>{state}</strong>: {esc(verdict.reason)} ({esc(verdict.looks)} "
            f"counted test look(s), {esc(verdict.family_looks)} in earlier plans of its family).</p>")


LONG_VALUE = 96  # characters of a field shown whole; a longer one (a behaviour sketch: 4,096 hex) is cut


def _shown(value: Any) -> str:
    """A payload value as the report shows it: numbers formatted, lists and dicts as JSON, long text cut."""
    if isinstance(value, float):
        return num(value)
    if value is None:
        return esc(value)
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    if len(text) > LONG_VALUE:
        return f"<code>{esc(text[:16])}</code>&hellip; ({len(text):,} characters, in the ledger)"
    return esc(text)


def _kv(payload: dict[str, Any]) -> str:
    return table(["field", "value"], [[esc(k), _shown(v)] for k, v in payload.items()], "report")


def events_table(events: list[dict]) -> str:
    rows = []
    for e in events:
        p = leaderboard.payload(e)
        summary = ", ".join(f"{k} {num(p[k]) if isinstance(p[k], float) else esc(p[k])}" for k in
                            ("overall", "points", "rule", "judge", "flags", "kind", "message") if k in p
                            and not isinstance(p[k], list | dict))
        rows.append([esc(e.get("seq")), esc(e.get("time")), esc(e.get("kind")), summary,
                     f"<code>{esc(str(e.get('hash', ''))[:16])}</code>"])
    return table(["seq", "time", "event", "summary", "hash"], rows, "events")


def entry_page(check: LedgerStatus, data: SiteData, row: pd.Series) -> str:
    events = data.entry_events(row.board, row["name"])
    scored = [leaderboard.payload(e) for e in events if e.get("kind") in leaderboard.SCORED]
    latest = scored[-1] if scored else {}
    claim = claim_text(data.events, next((e for e in reversed(events) if e.get("kind") == "submission"), None))
    texts = data.texts.get(latest.get("code_sha256"))
    if row.kind == "baseline":
        description = "<p>A baseline shipped with the arena (cachecraft_lib/methods/registry.py).</p>"
    elif texts and texts.description is not None:
        description = f'<div class="description">{markdown(texts.description)}</div>'
    elif texts:
        description = ("<p>No DESCRIPTION.md shown: absent, or refused (a symbolic link, not a plain file, over "
                       "the size cap, or in a private folder).</p>")
    else:
        description = (f"<p>No submission folder with this code (sha256 <code>{esc(latest.get('code_sha256'))}"
                       "</code>) was given to the site generator.</p>")
    dev = f"<pre>{esc(json.dumps(texts.dev_report, indent=1))}</pre>" if texts and texts.dev_report else \
        "<p>No dev report recorded for this entry.</p>"
    flags = row.get("flags") or ""
    body = (f"<h1>{esc(row['name'])} <small>on board <a href=\"../boards/{esc(row.board)}.html\">{esc(row.board)}"
            f"</a></small></h1>" + (f'<p class="flag">FLAGGED: {esc(flags)}</p>' if flags else "") +
            f"<p>by {esc(row.author)}; overall {num(row.overall)} [{num(row.lo)}, {num(row.hi)}]; rank "
            f"{rank_text(row)}; points {num(row.points, 1)}</p>{claim}"
            f"<h2>DESCRIPTION.md</h2>{description}<h2>Dev report (public dev items)</h2>{dev}"
            f"<h2>Test report (hidden test items, from the ledger)</h2>{_kv(latest) if latest else ''}"
            f"<h2>Ledger events</h2>{events_table(events)}")
    return page(f"{row['name']} on board {row.board}", body, banner(check), depth=1)
