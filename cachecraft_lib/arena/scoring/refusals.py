"""A refused submission in the ledger: its kind, its author and a message that carries nothing of the submitter's.

On the hidden test items a method's own error text could carry what it saw (token ids recovered from the keys),
so the public ``rejection`` event there holds only the kind (one of ``submission.KINDS``, never the method's
choice of text) and ``TEST_REFUSAL``. A refusal by the static checks (before anything runs) is public too, and
its detailed message quotes the submission (a name, an author): so it is recorded under a neutral id
(``shown_name``: ``refused-`` and a hash of the folder's files, never the folder's name or the name it declares,
either of which may be a baseline's, ``no_press`` or another author's entry), with the kind's fixed sentence
(``STATIC_SENTENCES``) as its message, and an author that is a reserved name is shown as ``unknown``; its
detailed text is the folder's own (``cachecraft arena check`` shows it), so nothing else is written. A method's
text on test items goes to the organiser's private log (``<arena>/private/organiser.log``, one JSON line per
refusal with the ledger's sequence number).

The public payload is built field by field from ``PUBLIC_FIELDS`` (``public_rejection``), each from what the
folder checks fixed before anything ran (board, name, author) or from a fixed set (the kind, its sentence):
nothing the run produced (a method's text, an exit code, the machine's uptime, memory, kernel, disk or CPUs in an
error) can reach a rejection anyone reads, whatever the error object carries.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ...util.terminal_text import safe_text

ORGANISER_LOG = "organiser.log"
TEST_REFUSAL = ("refused on the hidden test items ({kind}); the method's own message is kept in the organiser's "
                "private log (run `cachecraft arena dev` to see it on the dev items)")
STATIC_REFUSAL = "refused by the folder checks ({kind}: {what}); run `cachecraft arena check FOLDER` to see what to fix"
STATIC_SENTENCES = {
    "missing_file": "a required file is missing",
    "bad_description": "DESCRIPTION.md lacks a required section or is not plain UTF-8 text",
    "bad_metadata": "metadata.yaml is not a plain mapping with a valid name, author and boards",
    "bad_method": "method.py does not define a valid class Method for the boards it names",
    "bad_import": "method.py imports a module outside the allowed list",
    "file_access": "method.py reaches for files, processes or the interpreter",
    "network": "method.py reaches for the network",
    "reserved_name": "the name is a baseline's, the uncompressed reference's or another author's entry's",
    "bad_params": "params.npz is not a small bundle of finite numeric arrays",
    "bad_probe": "a probe text is empty or too long",
    "not_allowed": "a hook the named boards do not run",
    "bad_folder": "the folder holds a symbolic link, a hard-linked file or a special file",
}
PUBLIC_MESSAGE_MAX, PRIVATE_MESSAGE_MAX = 600, 2000
PUBLIC_FIELDS = ("board", "name", "author", "author_key", "kind", "message", "on_test")  # a rejection's, all of it
FOLDER_FILES = ("method.py", "DESCRIPTION.md", "metadata.yaml", "params.npz")
HASH_CAP = 16 * 1024 * 1024  # the largest file a submission may ship (params.npz)


def bounded(text: str, limit: int = PUBLIC_MESSAGE_MAX) -> str:
    """At most ``limit`` characters, every control, format or invisible character shown escaped
    (``util.terminal_text.safe_text``, the one function for text from a submission)."""
    return safe_text(text, limit)


def shown_name(folder: str | Path) -> str:
    """A refused folder's neutral id for the ledger: ``refused-`` and 12 hex digits of a hash of its files (read
    without following links; one that cannot be read counts as refused), never a name the submitter chose."""
    from ..submissions.errors import SubmissionError
    from ..submissions.safe_files import read_member

    digest = hashlib.sha256()
    for name in FOLDER_FILES:
        try:
            raw = read_member(folder, name, HASH_CAP, "bad_folder")
            part = b"absent" if raw is None else hashlib.sha256(raw).digest()
        except (SubmissionError, OSError):
            part = b"refused"
        digest.update(name.encode() + b"\0" + part)
    return f"refused-{digest.hexdigest()[:12]}"


def shown_author(author: str) -> str:
    """The author as a rejection shows it: bounded and escaped, ``unknown`` when it is a reserved name (a
    baseline's, the reference's, ``baseline``), so no rejection reads as the arena's own."""
    from ..submissions.identity import name_key, reserved_names

    return "unknown" if name_key(author) in reserved_names() else bounded(author, 200)


def public_message(kind: str, on_test: bool) -> str:
    """The public message of a refusal of ``kind``: a fixed sentence, never the submission's or method's text."""
    if on_test:
        return TEST_REFUSAL.format(kind=kind)
    return STATIC_REFUSAL.format(kind=kind, what=STATIC_SENTENCES.get(kind, "see `cachecraft arena check`"))


def public_rejection(board: str, name: str, author: str, kind: Any, on_test: bool) -> dict[str, Any]:
    """The public payload of a refusal: exactly ``PUBLIC_FIELDS``, the kind one of ``KINDS`` (else ``crash``) and
    the message its fixed sentence; nothing else of the error is passed in."""
    from ..submissions.errors import KINDS
    from ..submissions.identity import author_key

    kind = kind if isinstance(kind, str) and kind in KINDS else "crash"  # never the method's text
    on_test = on_test is True
    fields = {"board": str(board), "name": bounded(name, 64), "author": shown_author(author),
              "author_key": author_key(author), "kind": kind, "message": public_message(kind, on_test),
              "on_test": on_test}
    return {field: fields[field] for field in PUBLIC_FIELDS}


def record_refusal(ledger: Any, root: Path, board: str, name: str, author: str, err: Any,
                   on_test: bool = False) -> dict[str, Any]:
    """Append the ``rejection`` event (``public_rejection``; and on test items the private log line with the
    method's text); returns the public payload.
    ``name``: ``shown_name(folder)`` for a static refusal, the checked submission's name on test items."""
    payload = public_rejection(board, name, author, getattr(err, "kind", "crash"), on_test)
    kind, text = payload["kind"], str(err)
    event = ledger.append("rejection", payload)
    if on_test:  # a static refusal's text is the folder's own: `arena check` shows it again, nothing is kept
        path = root / "private" / ORGANISER_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"ledger_seq": event["seq"], "board": board, "name": name, "author": author,
                                "kind": kind, "message": text[:PRIVATE_MESSAGE_MAX]}) + "\n")
    return payload
