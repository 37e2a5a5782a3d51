"""Text written by someone else (a submission's author, name, error text) made safe to print or record.

Why one function: a string from a submission reaches a terminal through ``arena check``, the leaderboard, the
judge's notes and the ledger's messages. Printed raw, an ANSI/CSI/OSC escape recolours or rewrites the
terminal (or sets its title, or a hyperlink), a bell rings, a C1 control acts as ESC, a bidi override
(U+202A-202E, U+2066-2069) reverses what follows so a line reads other than it is, and a zero-width character
makes two different names look alike. ``safe_text`` shows every such character visibly (``\\x1b``, ``\\u202e``),
so nothing in the text acts on the terminal and nothing is hidden, and bounds the result.
"""

from __future__ import annotations

import unicodedata
from typing import Any

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})  # controls, format, unassigned, lines
# Letters and marks that draw nothing (Hangul fillers, Khmer vowels, Mongolian selectors, the grapheme joiner)
INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u3164\uffa0")
MAX_MARKS = 3  # combining marks kept on one character; more (stacked "zalgo" text) are shown escaped
DEFAULT_LIMIT = 200


SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(ch: str) -> str:
    if ch in SHORT_ESCAPES:
        return SHORT_ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _shown(ch: str, marks: int) -> tuple[str, int]:
    """How one character is shown, and the run of combining marks after it."""
    category = unicodedata.category(ch)
    if category in HIDDEN_CATEGORIES or ch in INVISIBLE:
        return _escaped(ch), 0
    if category == "Zs":
        return " ", 0  # no-break and other widths of space read as a plain space
    if category in ("Mn", "Me"):
        return (ch if marks < MAX_MARKS else _escaped(ch)), marks + 1
    return ch, 0


def safe_text(text: object, limit: int | None = DEFAULT_LIMIT) -> str:
    """``text`` on one line with every control, format, invisible or unassigned character shown escaped
    (``\\x1b``, ``\\u202e``), and at most ``limit`` characters (``...`` marks a cut; None: no bound)."""
    raw = text if isinstance(text, str) else str(text)
    head = raw if limit is None else raw[: limit + 1]  # every character shows as at least one: enough to read
    out, marks = [], 0
    for ch in head:
        shown, marks = _shown(ch, marks)
        out.append(shown)
    joined = "".join(out)
    if limit is not None and (len(joined) > limit or len(raw) > limit):
        return joined[: max(limit - 3, 0)] + "..."
    return joined


def safe_table(table: Any, limit: int | None = DEFAULT_LIMIT) -> Any:
    """A copy of a pandas ``table`` with every text cell (and text index label) made safe by ``safe_text``:
    a leaderboard's names and authors come from submissions."""
    def cell(value: object) -> object:
        return safe_text(value, limit) if isinstance(value, str) else value

    out = table.map(cell)
    out.index = out.index.map(cell)
    out.columns = out.columns.map(cell)
    return out
