"""Points: the reference arena's rule, which locked its leaderboard, and ours, which keeps real improvements worth submitting.

Points are ``SCALE`` (100) times a gain in overall score. ``award`` returns what one new entry adds to its
author's total on a board, from the board's standing (the ledger's baseline and submission payloads).

- ``post`` (the seed post): credit only for moving the board's current best (the gate passed), worth the gain
  over that moving best, and an author's total counts only their single best submission per board. An author
  who already leads must beat their own entry by more than their previous gain to earn anything: the reference arena's
  agents called the board "locked" and stopped submitting.
- ``frozen_bar`` (ours): credit against the bar frozen at launch (the best eligible baseline of the round):
  ``SCALE * (overall - bar)`` once the gain over the bar is resolved (its lower bound above the gate's
  threshold), an author's total counting their best such credit per board; plus a frontier bonus, the gain
  over the moving best, each time an entry moves the board. Every resolved improvement over the published
  methods earns something, a better version of one's own method earns its improvement, and moving the
  frontier stays the best thing to do. Resubmitting a method earns nothing (same credit, no move).

A judge's flag (a ``review`` event in the ledger, ``judges``) zeroes an entry's points under both rules: a flagged
entry earns nothing, and its credit does not count as its author's best (their next honest entry earns in
full). The post also took 20 points off; we do not: zeroing removes anything gained by gaming, while a
penalty on top would punish a judge's false positive (LLM judges vary between runs) beyond the entry itself.
``flagged(events)`` reads the flags; ``with_flags(state, events)`` adds them to a board's state for ``award``.

The lower bound of the gain over the bar is the gate's paired lower bound against the best before
(``gain_lo``) plus that best's lead over the bar (a point estimate; the bar's own entry has lead 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ...methods.registry import NO_PRESS
from .events import Kind

SCALE = 100.0
GATE_THRESHOLD = 0.005  # the reference arena's gate: lower end of the gain's 95% interval at +0.005 or more


@dataclass(frozen=True)
class Rule:
    """A points rule: ``credit`` of one entry (an author keeps their best), ``bonus`` added per entry."""

    name: str
    why: str
    credit: Callable[[pd.DataFrame, dict, float], float]
    bonus: Callable[[pd.DataFrame, dict, float], float]


def launch_bar(state: pd.DataFrame) -> tuple[str, float]:
    """The frozen bar: the best eligible baseline of the board's round (name, overall)."""
    if state.empty or "kind" not in state:
        raise ValueError("no baselines on this board yet: record them before scoring submissions")
    base = state[(state.kind == Kind.BASELINE) & state.eligible.astype(bool) & ~state.name.isin([NO_PRESS, "random"])]
    if base.empty:
        raise ValueError("no eligible baseline on this board: the bar cannot be set")
    top = base.loc[base.overall.idxmax()]
    return str(top["name"]), float(top.overall)


def _moved_gain(state: pd.DataFrame, entry: dict, threshold: float) -> float:
    return SCALE * max(0.0, float(entry.get("gain") or 0.0)) if entry.get("moved") else 0.0


def _bar_credit(state: pd.DataFrame, entry: dict, threshold: float) -> float:
    if not entry.get("eligible", True):
        return 0.0
    _, bar = launch_bar(state)
    before = state[state.name == entry.get("best_before")]
    lead = float(before.overall.iloc[0]) - bar if len(before) else 0.0
    lower = float(entry.get("gain_lo", entry.get("gain", 0.0))) + lead
    return SCALE * max(0.0, float(entry["overall"]) - bar) if lower > threshold else 0.0


def _nothing(state: pd.DataFrame, entry: dict, threshold: float) -> float:
    return 0.0


RULES: dict[str, Rule] = {
    "post": Rule("post", "credit only against the moving best; an author's single best submission per board",
                 _moved_gain, _nothing),
    "frozen_bar": Rule("frozen_bar", "credit against the bar frozen at launch (an author's best per board) "
                                     "plus a bonus for each move of the frontier", _bar_credit, _moved_gain),
}


def _rule(rule: Rule | str) -> Rule:
    if isinstance(rule, Rule):
        return rule
    if rule not in RULES:
        raise ValueError(f"unknown points rule {rule!r}; rules: {', '.join(RULES)}")
    return RULES[rule]


def flagged(events: list[dict]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(board, name) -> the flags of its reviews: each judge's latest review counts, any judge's flag stands.

    A review judges one version of the code (``code_sha256``): when the entry's latest submission has other
    code (a fixed method resubmitted under its name), the older reviews no longer apply to it.
    """
    code: dict[tuple[str, str], str] = {}
    latest: dict[tuple[str, str, str], tuple[str | None, tuple[str, ...]]] = {}
    for event in events:
        data = event.get("payload", event)
        key = (data.get("board"), data.get("name"))
        if event.get("kind") == Kind.SUBMISSION and data.get("code_sha256"):
            code[key] = data["code_sha256"]
        elif event.get("kind") == Kind.REVIEW:
            latest[(*key, data.get("judge", ""))] = (data.get("code_sha256"), tuple(data.get("flags") or ()))
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for (board, name, _), (sha, flags) in latest.items():
        if sha and code.get((board, name), sha) != sha:
            continue
        out[(board, name)] = tuple(dict.fromkeys(out.get((board, name), ()) + flags))
    return {key: flags for key, flags in out.items() if flags}


def with_flags(state: pd.DataFrame, events: list[dict]) -> pd.DataFrame:
    """``state`` (a board's scored payloads) with a ``flags`` column from the ledger's reviews."""
    marks = flagged(events)
    state = state.copy()
    if not state.empty:
        state["flags"] = [list(marks.get((b, n), ())) for b, n in zip(state.board, state.name, strict=True)]
    return state


def _is_flagged(row: dict) -> bool:
    flags = row.get("flags")
    return isinstance(flags, list | tuple) and len(flags) > 0


def award(rule: Rule | str, board_state: pd.DataFrame, entry: dict, threshold: float = GATE_THRESHOLD) -> float:
    """Points ``entry`` adds to its author's total on the board (``board_state``: the board's scored payloads).

    A flagged entry (``entry["flags"]`` or its row's ``flags`` in the state, see ``with_flags``) earns 0, and
    flagged earlier entries do not count as the author's best.
    """
    rule = _rule(rule)
    if entry.get("kind", "submission") != "submission":
        return 0.0
    if _is_flagged(entry):
        return 0.0
    if not board_state.empty and "flags" in board_state:
        clean = [not _is_flagged(r) for r in board_state.to_dict("records")]
        if not all(ok for ok, name in zip(clean, board_state.name, strict=True) if name == entry["name"]):
            return 0.0
        board_state = board_state[clean]
    earlier = board_state[(board_state.get("kind") == Kind.SUBMISSION) & (board_state.name != entry["name"])] \
        if not board_state.empty else board_state
    mine = earlier[earlier.author == entry.get("author")] if not earlier.empty else earlier
    before = max((rule.credit(board_state, row, threshold) for row in mine.to_dict("records")), default=0.0)
    return round(max(0.0, rule.credit(board_state, entry, threshold) - before)
                 + rule.bonus(board_state, entry, threshold), 6)


def replay(entries: pd.DataFrame, rule: Rule | str, threshold: float = GATE_THRESHOLD) -> pd.DataFrame:
    """Entries in order (``board, name, author, kind, overall``; baselines first) with each one's points.

    Without per-item scores (a published table) a gain counts as resolved when its point value clears the
    threshold (``gain_lo = gain``): the replay shows the rules, not the noise.
    """
    rule = _rule(rule)
    need = {"board", "name", "author", "kind", "overall"} - set(entries.columns)
    if need:
        raise ValueError(f"replay needs columns {sorted(need)}")
    rows: list[dict] = []
    for entry in entries.to_dict("records"):
        state = pd.DataFrame([r for r in rows if r["board"] == entry["board"]])
        entry = {"eligible": True, **entry}
        if entry["kind"] == Kind.BASELINE:
            entry.update(moved=bool(entry["eligible"]), points=0.0, best_before=None, gain=None)
        else:
            moved_rows = state[state.moved.astype(bool)] if not state.empty else state
            best = moved_rows.loc[moved_rows.overall.idxmax()] if len(moved_rows) else None
            gain = float(entry["overall"]) - float(best.overall) if best is not None else float("nan")
            entry.update(best_before=None if best is None else best["name"], gain=gain, gain_lo=gain,
                         moved=bool(entry["eligible"] and gain > threshold))
            state = pd.DataFrame([*[r for r in rows if r["board"] == entry["board"]], entry])
            entry["points"] = award(rule, state, entry, threshold)
        rows.append(entry)
    out = pd.DataFrame(rows)
    out["rule"] = rule.name
    return out


def totals(replayed: pd.DataFrame) -> pd.DataFrame:
    """Points per author and board from ``replay`` (baselines left out)."""
    subs = replayed[replayed.kind == Kind.SUBMISSION]
    return subs.pivot_table(index="author", columns="board", values="points", aggfunc="sum", fill_value=0.0)


def post_entries() -> pd.DataFrame:
    """The seed post's launch bars and eight submissions (its table; B entries on both B boards)."""
    bars = [("A", "Ada-KV", 0.770), ("B_online", "KVzip", 0.430), ("B_offline", "KVzip", 0.608), ("C", "H2O", 0.669)]
    subs = [("Oct 18 11:14", "agent1-001 probevr", "agent1", {"B_online": 0.647, "B_offline": 0.698}),
            ("Oct 18 11:31", "agent2-001 headprobe", "agent2", {"B_online": 0.606, "B_offline": 0.645}),
            ("Oct 18 13:13", "agent1-002 wherewhat_a", "agent1", {"A": 0.812}),
            ("Oct 18 13:40", "agent2-002 spanvote", "agent2", {"A": 0.811}),
            ("Oct 18 18:04", "agent2-003 kvprior", "agent2", {"C": 0.713}),
            ("Oct 18 19:57", "agent1-003 foresight_c", "agent1", {"C": 0.658}),
            ("Oct 18 22:48", "agent1-004 foresight_c2", "agent1", {"C": 0.680}),
            ("Oct 19 06:46", "agent2-004 kvprior_skim", "agent2", {"C": 0.691})]
    rows = [{"time": "launch", "board": b, "name": n, "author": "baseline", "kind": "baseline", "overall": v}
            for b, n, v in bars]
    rows += [{"time": t, "board": b, "name": n, "author": a, "kind": "submission", "overall": v}
             for t, n, a, scores in subs for b, v in scores.items()]
    return pd.DataFrame(rows)
