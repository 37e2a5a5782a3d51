"""Why a submission was refused: ``SubmissionError`` and its machine-readable kinds (one home, so the folder
checks, the parameters file and the probes can all raise it without importing one another).

A message may quote what the submission holds (a name, an array's name, a method's error text), so it is made
safe here, once for every caller (``util.terminal_text.safe_text``: escapes and bidi overrides shown visibly)
and bounded: ``STATIC_MESSAGE_MAX`` characters for a refusal before anything runs (it says what to fix, never the
input in full), ``RUN_MESSAGE_MAX`` for a failure while running (it keeps the head of the method's traceback).
"""

from __future__ import annotations

from ...util.terminal_text import safe_text

KINDS = ("missing_file", "bad_description", "bad_metadata", "bad_method", "bad_import", "file_access", "network",
         "crash", "timeout", "memory", "tampering", "bad_output", "over_budget", "duplicate_indices", "out_of_range",
         "reserved_name", "protocol", "bad_params", "bad_probe", "probe_is_question", "not_allowed", "bad_folder",
         "behaviour_mismatch")
STATIC_KINDS = frozenset({"missing_file", "bad_description", "bad_metadata", "bad_method", "bad_import",
                          "file_access", "network", "reserved_name", "bad_params", "bad_probe", "not_allowed",
                          "bad_folder"})
STATIC_MESSAGE_MAX, RUN_MESSAGE_MAX = 300, 2000


class SubmissionError(ValueError):
    """A submission was refused: ``kind`` is a short machine-readable reason (``KINDS``), the message what to fix
    (escaped and bounded: see the module doc)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        limit = STATIC_MESSAGE_MAX if kind in STATIC_KINDS else RUN_MESSAGE_MAX
        super().__init__(f"{kind}: {safe_text(message, limit)}")
