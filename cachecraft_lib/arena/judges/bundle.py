"""What a judge reads: a submission's files, its dev report and the earlier entries; never the test items.

A ``Bundle`` holds ``method.py``, ``DESCRIPTION.md`` and ``metadata.yaml`` as text (read, never run), the dev
report as JSON, and the earlier entries. The dev report is always the arena's own measurement
(``dev_report_json`` turns ``Arena.dev``'s result into it; ``cachecraft arena judge --run-dev`` writes it into
the arena's dev folder): a ``dev_report.json`` shipped inside the submission folder is ignored (its author
could write any number into it), and a report path inside the submission folder is refused. Every file read
passes ``safe_files.problem`` (the site uses the same check): a regular file inside its folder, reached through
no symbolic link, under the size cap, and outside the arena's ``private/`` folder (``arena_root``). The earlier entries: the shipped submissions
(``arena/submissions/*``), folders passed in, and the ledger's submission events (name, author, code hash),
matched to their code by hash where a folder has it; the submission itself (its folder, or its name and
author in the ledger) is never its own earlier entry. Nothing under the arena's ``private/`` folder (per-item
test values) is ever read: a judge sees what a submitter sees, plus the other entries.

``metadata.yaml`` may say which model family wrote the submission (``written_by: claude``), so the LLM judge
can break a tie with the other family, as the reference arena's judges did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..scoring.events import Kind
from ..submissions.errors import SubmissionError
from ..submissions.folder import DESCRIPTION_FILE, METADATA_FILE, METHOD_FILE
from ..submissions.metadata import parse_metadata
from ..submissions.safe_files import decode_text, problem
from ..submissions.safe_files import in_some_arena_private as _in_some_arena_private
from ..submissions.safe_files import inside as _inside

DEV_REPORT_FILE = "dev_report.json"
SHIPPED = Path(__file__).resolve().parents[1] / "examples"
TERMS = ("overall", "lo", "hi", "accuracy", "memory", "memory_physical", "speed", "overhead")


class BundleError(ValueError):
    """The bundle cannot be built (a missing folder or file, an unreadable dev report); says what to do."""


@dataclass(frozen=True)
class Entry:
    """An earlier arena entry: its code when a folder with it is known (``code`` is None otherwise)."""

    name: str
    author: str
    code_sha256: str
    code: str | None = None
    description: str = ""
    folder: Path | None = None


@dataclass(frozen=True)
class Bundle:
    """One submission as a judge sees it (see the module doc)."""

    folder: Path
    code: str
    description: str
    metadata: dict[str, Any]
    dev_report: dict[str, Any] | None = None
    earlier: tuple[Entry, ...] = field(default=())
    sha256: str = ""  # of method.py's bytes, as the ledger's submission events record it
    params: dict[str, Any] | None = None  # params.npz: its sha256 and each array's dtype and shape (None: none)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or self.folder.name)

    @property
    def author(self) -> str:
        return str(self.metadata.get("author") or "unknown")

    @property
    def written_by(self) -> str | None:
        """The model family that wrote the submission, when the metadata says (``written_by`` or ``model``)."""
        value = self.metadata.get("written_by") or self.metadata.get("model_family")
        return str(value).strip().lower() if value else None

    @property
    def code_sha256(self) -> str:
        return self.sha256 or hashlib.sha256(self.code.encode("utf-8")).hexdigest()

    def as_prompt(self) -> dict[str, Any]:
        """The bundle as the JSON an LLM judge reads (earlier entries without code are listed by name)."""
        return {"submission": {"name": self.name, "author": self.author, "metadata": self.metadata,
                               "method.py": self.code, "DESCRIPTION.md": self.description,
                               **({"params.npz": self.params} if self.params else {})},
                "dev_report": self.dev_report,
                "earlier_entries": [{"name": e.name, "author": e.author, "method.py": e.code,
                                     "DESCRIPTION.md": e.description} for e in self.earlier]}


def _allowed(path: Path, folder: Path, private: Path | None) -> bool:
    """``path`` may be read: ``safe_files.problem`` finds nothing wrong with it."""
    return problem(path, folder, private) is None


def _read(folder: Path, name: str, private: Path | None = None, binary: bool = False) -> Any:
    path = folder / name
    if not path.is_file():
        raise BundleError(f"{folder} has no {name}: a submission folder holds {METHOD_FILE}, {DESCRIPTION_FILE} "
                          f"and {METADATA_FILE} (see cachecraft_lib/arena/examples/frc/)")
    why = problem(path, folder, private)
    if why is not None:
        raise BundleError(f"{path} is refused: {why}; a submission's files are plain files inside its folder, "
                          "outside the arena's private folder")
    raw = path.read_bytes()
    if binary:
        return raw
    try:
        return decode_text(raw, name, "bad_description" if name == DESCRIPTION_FILE else "bad_metadata")
    except SubmissionError as err:
        raise BundleError(str(err)) from None


def _metadata(text: str) -> dict[str, Any]:
    """The metadata as the arena's loader reads it (no anchors, aliases or tags; bounded)."""
    try:
        return parse_metadata(text)
    except SubmissionError as err:
        raise BundleError(str(err)) from None


def load_bundle(folder: str | Path, dev_report: str | Path | dict | None = None,
                earlier: tuple[str | Path, ...] | list = (), events: list[dict] | None = None,
                shipped: bool = True, arena_root: str | Path | None = None) -> Bundle:
    """The bundle of the submission in ``folder``.

    ``dev_report``: the arena's measurement, a dict or a JSON file outside ``folder`` (None: no report; a
    ``dev_report.json`` inside ``folder`` is never read). ``earlier``: folders of earlier entries; ``events``:
    the ledger's events (their submissions join the earlier entries); ``shipped``: include
    ``arena/submissions/*``; ``arena_root``: nothing under its ``private/`` is read. The submission itself is
    never its own earlier entry.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BundleError(f"{folder} is not a folder; pass a submission folder")
    private = Path(arena_root) / "private" if arena_root is not None else None
    if private is not None and _inside(folder, private):
        raise BundleError(f"{folder} lies in the arena's private folder; a judge never reads it")
    raw = _read(folder, METHOD_FILE, private, binary=True)  # read once: the code judged is the code hashed
    code, description = raw.decode("utf-8", errors="replace"), _read(folder, DESCRIPTION_FILE, private)
    metadata = _metadata(_read(folder, METADATA_FILE, private))
    report = _dev_report(folder, dev_report, private)
    own = (str(metadata.get("name") or folder.name), str(metadata.get("author") or "unknown"))
    return Bundle(folder.resolve(), code, description, metadata, report,
                  _earlier(folder.resolve(), own, list(earlier), events or [], shipped, private,
                           hashlib.sha256(raw).hexdigest()),
                  hashlib.sha256(raw).hexdigest(), _params_summary(folder))


def _params_summary(folder: Path) -> dict[str, Any] | None:
    """What a judge reads of ``params.npz``: its sha256 and the arrays' names, dtypes and shapes (never the numbers:
    fitted weights are judged by the fitting script the description names); None when the folder ships none."""
    from ..submissions.params import load_params

    try:
        _, sha, arrays = load_params(folder)
    except ValueError as err:
        return {"invalid": str(err)}
    if not sha:
        return None
    return {"sha256": sha, "arrays": {k: {"dtype": a.dtype.name, "shape": list(a.shape)} for k, a in arrays.items()}}


def _dev_report(folder: Path, given: str | Path | dict | None, private: Path | None) -> dict | None:
    if given is None or isinstance(given, dict):
        return given  # None: a dev_report.json the submission ships is never read
    path = Path(given)
    if _inside(path, folder) or (private is not None and _inside(path, private)) or _in_some_arena_private(path):
        raise BundleError(f"dev report {path} lies inside the submission folder (or the arena's private folder): "
                          "a judge reads only the arena's own measurement (`cachecraft arena judge --run-dev`)")
    if not path.is_file():
        raise BundleError(f"dev report {path} not found; run `cachecraft arena judge {folder} --board BOARD "
                          "--run-dev` to write one")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise BundleError(f"dev report {path} is not valid JSON ({err}); write it again with --run-dev") from None


def _entry_from(folder: Path, private: Path | None = None) -> Entry | None:
    if not all(_allowed(folder / n, folder, private) for n in (METHOD_FILE, METADATA_FILE, DESCRIPTION_FILE)):
        return None  # a link out of its folder, or an entry inside the arena's private folder: never read
    try:
        raw = _read(folder, METHOD_FILE, private, binary=True)
        meta = _metadata(_read(folder, METADATA_FILE, private))
        desc = _read(folder, DESCRIPTION_FILE, private) if (folder / DESCRIPTION_FILE).is_file() else ""
    except (OSError, BundleError):
        return None
    return Entry(str(meta.get("name") or folder.name), str(meta.get("author") or "unknown"),
                 hashlib.sha256(raw).hexdigest(), raw.decode("utf-8", errors="replace"), desc, folder.resolve())


def _earlier(own_folder: Path, own: tuple[str, str], folders: list, events: list[dict],
             shipped: bool, private: Path | None = None, own_sha: str = "") -> tuple[Entry, ...]:
    """Earlier entries: other folders (the same code in another folder is another entry: a copy to catch), and
    the ledger's submissions. Nothing is dropped because of the (name, author) a submission declares (a copy
    could claim its source's): a folder is dropped only when it is this very folder (a byte-identical copy
    elsewhere is a copy to catch), and of the ledger only this submission's own record (the latest with its
    name, author and code hash)."""
    candidates = [Path(f) for f in folders]
    if shipped and SHIPPED.is_dir():
        candidates += sorted(p for p in SHIPPED.iterdir() if p.is_dir())
    found = [e for e in (_entry_from(p, private) for p in candidates if p.resolve() != own_folder) if e is not None]
    out = {(e.name, e.author, e.code_sha256): e for e in found}
    by_sha = {e.code_sha256: e for e in found}
    subs = [e.get("payload", e) for e in events if e.get("kind") == Kind.SUBMISSION]
    own_record = max((i for i, d in enumerate(subs) if (str(d.get("name")), str(d.get("author"))) == own
                      and str(d.get("code_sha256") or "") == own_sha), default=None)
    for i, data in enumerate(subs):
        sha = str(data.get("code_sha256") or "")
        key = (str(data.get("name")), str(data.get("author")), sha)
        if i == own_record or key in out:
            continue
        known = by_sha.get(sha)
        out[key] = Entry(*key, known.code if known else None, known.description if known else "",
                         known.folder if known else None)
    return tuple(out.values())


def dev_report_json(report: dict[str, Any], method: str, label: str = "") -> dict[str, Any]:
    """``Arena.dev``'s result (DataFrames, an interval) as plain JSON for ``method``'s bundle; ``label`` says
    which model measured it (the board's label: the embedded stand-in's results say so)."""
    scores = report["scores"]
    if method not in scores.index:
        raise BundleError(f"the dev report has no row for {method!r}; its methods: {', '.join(scores.index)}")
    gain = report.get("gain")
    return {"board": report["board"], "split": "dev", "label": label, "method": method,
            "best_baseline": report["best_baseline"],
            "scores": {str(m): {t: round(float(row[t]), 6) for t in TERMS if t in row}
                       for m, row in scores.iterrows()},
            "gain": None if gain is None else {"over": report["best_baseline"], "point": float(gain.point),
                                               "lo": float(gain.lo), "hi": float(gain.hi)},
            "eligible": bool(report.get("eligible")), "eligibility": str(report.get("eligibility", "")),
            "excluded_tasks": list(report.get("excluded_tasks") or [])}


def save_dev_report(report: dict[str, Any], method: str, path: str | Path, label: str = "") -> Path:
    """Write ``dev_report_json(report, method, label)`` to ``path`` (a file; its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dev_report_json(report, method, label), indent=2) + "\n", encoding="utf-8")
    return path
