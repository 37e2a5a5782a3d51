"""What ``Arena.submit`` checks of a loaded submission against the ledger, and the fields it records beside its
scores: one place for the ledger's view of a submission, apart from the verb's order of steps (``arena``).
"""

from __future__ import annotations

from typing import Any

from ..sandbox import boundary as os_boundary
from .boards.boards import Board
from .scoring.events import Kind
from .scoring.ledger_fields import payload

LOOK_ORIGIN = ("plan", "plan_hash", "run_id", "random_seed")  # what a test look keeps of an origin (issue 49)
DIGEST_FIELDS = (("code_ast", "program_ast"), ("code_shape", "program_shape"),
                 ("code_behaviour", "program_behaviour"), ("code_sketch", "program_sketch"))  # entry <- look


def look_origin(origin: dict | None) -> dict[str, Any]:
    """The part of a submission's origin a ``test_look`` carries: the pre-registered plan (its full hash, and
    its first 16 hex digits for reading), the run id and the random seed, where the origin has them, so looks
    are counted per plan and seed whatever author name the entry is under. Nothing for a hand-made entry."""
    return {k: origin[k] for k in LOOK_ORIGIN if origin and origin.get(k) is not None}


def check_identity(board: Board, sub: Any, events: list[dict]) -> None:
    """The boards and hooks fit, and the name is not another author's entry on this board."""
    from .submissions.errors import SubmissionError
    from .submissions.identity import author_key, name_key

    if board.name not in sub.boards:
        raise SubmissionError("bad_metadata", f"the submission names boards {list(sub.boards)}, not "
                                              f"{board.name}: add it to its metadata")
    if board.decode_time and not sub.decode:
        raise SubmissionError("bad_method", f"board {board.name} evicts while decoding: class Method must define "
                                            "decode(layer)")
    for e in events:
        data = payload(e)
        if e.get("kind") == Kind.SUBMISSION and data.get("board") == board.name \
                and name_key(str(data.get("name"))) == name_key(sub.name) \
                and author_key(str(data.get("author_key") or data.get("author"))) != sub.author_key:
            raise SubmissionError("reserved_name", f"name {sub.name!r} is another author's entry on board "
                                                   f"{board.name}; choose another name in metadata.yaml")


def entry_extra(sub: Any, digests: dict[str, str], origin: dict | None, ran: str, weak_ok: bool) -> dict[str, Any]:
    """The entry's fields beside its scores: the sandbox it ran in (``ran``), the hooks' files, its origin and
    the digests its test look carried (under the entry's names)."""
    whole = getattr(os_boundary, "WHOLE", (os_boundary.FULL,))  # the boundaries that are not "weak"
    extra: dict[str, Any] = {"sandbox": ran, "sandbox_weak": ran not in whole, "weak_sandbox_allowed": weak_ok}
    if sub.params_sha256:  # only when shipped: an entry without the hooks is as before they existed
        extra["params_sha256"] = sub.params_sha256
    if sub.probes:
        extra["probes"] = list(sub.probes)
    if getattr(sub, "allocation", "uniform") != "uniform":  # metadata's head-adaptive budgets change the run
        extra["allocation"] = sub.allocation
    if origin:
        extra["origin"] = origin
    extra.update({k: digests[f] for k, f in DIGEST_FIELDS if f in digests})
    return extra
