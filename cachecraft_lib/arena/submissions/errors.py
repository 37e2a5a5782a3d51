"""Why a submission was refused: ``SubmissionError`` and its machine-readable kinds (one home, so the folder
checks, the parameters file and the probes can all raise it without importing one another)."""

from __future__ import annotations

KINDS = ("missing_file", "bad_description", "bad_metadata", "bad_method", "bad_import", "file_access", "network",
         "crash", "timeout", "memory", "tampering", "bad_output", "over_budget", "duplicate_indices", "out_of_range",
         "reserved_name", "protocol", "bad_params", "bad_probe", "probe_is_question", "not_allowed")


class SubmissionError(ValueError):
    """A submission was refused: ``kind`` is a short machine-readable reason (``KINDS``), the message what to fix."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")
