"""A refused submission in the ledger: its kind, its author and a message that carries nothing of the test split.

On the hidden test items a method's own error text could carry what it saw (token ids recovered from the keys),
so the public ``rejection`` event there holds only the kind (one of ``submission.KINDS``, never the method's
choice of text) and ``TEST_REFUSAL``; the text goes to the organiser's private log
(``<arena>/private/organiser.log``, one JSON line per refusal with the ledger's sequence number). Refusals
before anything runs (the static checks) keep their message, bounded and escaped: it is the arena's own text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...util.terminal_text import safe_text

ORGANISER_LOG = "organiser.log"
TEST_REFUSAL = ("refused on the hidden test items ({kind}); the method's own message is kept in the organiser's "
                "private log (run `cachecraft arena dev` to see it on the dev items)")
PUBLIC_MESSAGE_MAX, PRIVATE_MESSAGE_MAX = 600, 2000


def bounded(text: str, limit: int = PUBLIC_MESSAGE_MAX) -> str:
    """At most ``limit`` characters, every control, format or invisible character shown escaped
    (``util.terminal_text.safe_text``, the one function for text from a submission)."""
    return safe_text(text, limit)


def shown_name(folder: str | Path) -> str:
    """A refused folder's name for the ledger (no path, bounded)."""
    return bounded(Path(folder).name, 64)


def record_refusal(ledger: Any, root: Path, board: str, name: str, author: str, err: Any,
                   on_test: bool = False) -> dict[str, Any]:
    """Append the ``rejection`` event (and, on test items, the private log line); returns the public payload."""
    from ..submissions.errors import KINDS
    from ..submissions.identity import author_key

    kind = getattr(err, "kind", "crash")
    kind = kind if kind in KINDS else "crash"  # a kind is one of a fixed set, never the method's text
    text = str(err)
    payload = {"board": board, "name": bounded(name, 64), "author": bounded(author, 200),
               "author_key": author_key(author), "kind": kind,
               "message": TEST_REFUSAL.format(kind=kind) if on_test else bounded(text), "on_test": on_test}
    event = ledger.append("rejection", payload)
    if on_test:
        path = root / "private" / ORGANISER_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"ledger_seq": event["seq"], "board": board, "name": name, "author": author,
                                "kind": kind, "message": text[:PRIVATE_MESSAGE_MAX]}) + "\n")
    return payload
