"""``metadata.yaml``: read as plain data by a YAML loader that refuses what plain data never needs.

A submission's metadata is a small mapping (``name``, ``author``, ``boards``, optional hooks), so the loader
(``parse_metadata``) walks the parser's events before building anything and refuses, each as
``SubmissionError("bad_metadata")`` with a message that never quotes the file:

- anchors and aliases (``&a``/``*a``): an alias bomb expands a few lines into millions of nodes, and a value
  shared by reference is never needed here; merge keys (``<<:``) likewise;
- tags (``!!python/object``, ``!custom``, even ``!!str``): plain data needs none;
- more than one document, more than ``MAX_NODES`` nodes, nesting deeper than ``MAX_DEPTH``, a scalar longer than
  ``MAX_SCALAR_CHARS`` (a 100,000-digit number would also trip Python's int conversion limit);
- a file over ``MAX_METADATA_BYTES``, not UTF-8 or binary (``safe_files.decode_text``).

``check_metadata`` then checks ``name``, ``author`` and ``boards``; ``metadata_author``/``metadata_origin`` read
the same file leniently for the ledger (a refused folder still has an author to count).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import SubmissionError
from .identity import author_key
from .safe_files import decode_text, read_member

METADATA_FILE = "metadata.yaml"
MAX_METADATA_BYTES = 16 * 1024
MAX_SCALAR_CHARS, MAX_NODES, MAX_DEPTH = 1000, 500, 6
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
BOARD_RE = re.compile(r"^[A-Za-z0-9_]{1,32}$")
# Characters an author may not hold: controls, bidi embeddings, overrides and isolates (they reorder what follows)
BIDI_OR_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
STRING = {"type": "string"}
# An origin's JSON schema (``arena.schemas``, the arena's one validator): each known key and what it holds.
# child_id, rank: which of the run's best programs (`--top K`); registration ("preregistered" or "exploratory"),
# plan (the plan's hash, 16 hex digits, for reading) and plan_hash (all 64, what claims match): the run's
# pre-registration (search/preregister.py); shortlist_sha256, selection_units_sha256: the run's selection files as
# its selected.json records them, so the ledger holds what verify_claim compares with the run folder;
# random_seed: 0 <= s < 2**31 (a huge one crashed the site)
ORIGIN_SCHEMA = {"type": "object", "properties": {
    **{k: STRING for k in ("kind", "run_id", "seed", "mutator", "child_id", "registration", "plan", "plan_hash",
                           "shortlist_sha256", "selection_units_sha256")},
    "random_seed": {"type": "integer", "minimum": 0, "exclusiveMaximum": 2 ** 31},
    "iterations": {"type": "integer"}, "rank": {"type": "integer"}}}


def _refuse(message: str) -> SubmissionError:
    return SubmissionError("bad_metadata", f"{METADATA_FILE} {message}")


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" (line {mark.line + 1})" if mark is not None else ""


def _check_events(text: str) -> None:
    """Refuse anchors, aliases, tags, several documents and oversized or deep structures, before building."""
    depth = nodes = documents = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise _refuse(f"uses an anchor or alias (&, *){_where(event)}; write each value out")
            if getattr(event, "tag", None) is not None:  # the parser sets a node's tag only when one is written
                raise _refuse(f"uses a tag (!){_where(event)}; plain values need none")
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _refuse("holds more than one document (---); keep one mapping")
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise _refuse(f"holds more than {MAX_NODES} values")
            if isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.style is None:
                raise _refuse(f"uses a merge key (<<){_where(event)}; write each key out")
            if isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
                raise _refuse(f"has a value of {len(event.value)} characters{_where(event)}; at most "
                              f"{MAX_SCALAR_CHARS}")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _refuse(f"nests deeper than {MAX_DEPTH} levels{_where(event)}")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as err:
        raise _refuse(f"is not valid YAML{_where_error(err)}; check its indentation and quotes") from None


def _where_error(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def parse_metadata(text: str) -> dict:
    """``metadata.yaml``'s mapping, loaded as plain data (see the module doc); ``SubmissionError`` otherwise."""
    _check_events(text)
    try:
        meta = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        raise _refuse("cannot be read as plain data (keys must be plain words)") from None
    if not isinstance(meta, dict):
        raise _refuse("must be a mapping with name, author, boards")
    return meta


def read_metadata_text(folder: str | Path) -> str | None:
    """The text of ``folder``'s ``metadata.yaml`` (None when absent), read by ``safe_files.read_member``."""
    raw = read_member(folder, METADATA_FILE, MAX_METADATA_BYTES, "bad_metadata")
    return None if raw is None else decode_text(raw, METADATA_FILE, "bad_metadata")


def read_metadata(folder: str | Path) -> dict:
    """``folder``'s metadata as ``parse_metadata`` loads it; ``SubmissionError`` when absent or refused."""
    text = read_metadata_text(folder)
    if text is None:
        raise SubmissionError("missing_file", f"{Path(folder).name} has no {METADATA_FILE}")
    return parse_metadata(text)


def check_metadata(text: str | dict) -> tuple[str, str, tuple[str, ...]]:
    """``name``, ``author`` and ``boards`` from ``metadata.yaml`` (its text, or the mapping already parsed)."""
    meta = parse_metadata(text) if isinstance(text, str) else text
    missing = [k for k in ("name", "author", "boards") if not meta.get(k)]
    if missing:
        raise _refuse(f"lacks {missing}; e.g. name: my-method, author: me, boards: [A]")
    name, author, boards = meta["name"], meta["author"], meta["boards"]
    if not isinstance(author, str | int) or not isinstance(name, str | int):
        raise _refuse("must give name and author as plain text")
    name, author = str(name), str(author).strip()
    if not author_key(author) or len(author) > 200:
        raise _refuse("author must have visible characters (at most 200)")
    if BIDI_OR_CONTROL.search(author):
        raise _refuse("author holds a control or text-direction character; write it as plain text")
    if not NAME_RE.match(name):
        raise _refuse(f"name {name[:40]!r} must be lowercase letters, digits, '-' or '_' (at most 64, starting "
                      "with a letter or digit)")
    if isinstance(boards, str):
        boards = [boards]
    if not isinstance(boards, list) or not boards or not all(isinstance(b, str) and BOARD_RE.match(b)
                                                             for b in boards):
        raise _refuse("boards must be a list of board names (letters, digits, _), e.g. boards: [A, B]")
    return name, author, tuple(boards)


def check_allocation(value: object, returns: str, probes: tuple[str, ...], whole: bool) -> str:
    """``allocation`` from metadata.yaml: ``uniform`` (default, ``budget`` entries per KV head) or
    ``head_adaptive`` (Ada-KV: a layer's ``budget x heads`` entries go to the highest scores over all its heads
    together, each head keeping at least a fifth of its budget; applied by masking keys, as KVPress's AdaKVPress
    does, so the physical cache is not smaller). Only a per-layer ``score`` method can be allocated this way."""
    if value is None or value == "uniform":
        return "uniform"
    if value != "head_adaptive":
        raise _refuse("allocation must be uniform or head_adaptive")
    if returns != "scores" or probes or whole:
        raise SubmissionError("bad_metadata", "allocation: head_adaptive needs a score(layer) method without probes "
                                              "or whole_cache (the harness pools the scores over the heads)")
    return "head_adaptive"


def _lenient(folder: str | Path) -> dict:
    try:
        return read_metadata(folder)
    except (SubmissionError, OSError):
        return {}


def metadata_author(folder: str | Path) -> str:
    """The author ``metadata.yaml`` names, read leniently (for the ledger when the folder fails its checks);
    ``"unknown"`` when it names none or cannot be read safely."""
    author = _lenient(folder).get("author")
    return str(author).strip()[:200] if isinstance(author, str | int) and str(author).strip() else "unknown"


def metadata_origin(folder: str | Path) -> dict | None:
    """Where the entry came from, if ``metadata.yaml`` says (``origin:`` with ``kind: search``, ``run_id``,
    ``seed``, ``random_seed``, ``iterations``, ``mutator``, and with ``--top`` ``child_id`` and ``rank``; written by
    ``cachecraft arena submit-search``): the ledger records it beside the entry. Read leniently against
    ``ORIGIN_SCHEMA``, key by key: unknown keys, values of the wrong type (a bool is no integer) and a random_seed
    outside 0 <= s < 2**31 are dropped."""
    origin = _lenient(folder).get("origin")
    if not isinstance(origin, dict):
        return None
    from ..schemas import validator

    checks = {k: validator(spec) for k, spec in ORIGIN_SCHEMA["properties"].items()}
    kept = {k: v[:200] if isinstance(v, str) else v for k, v in origin.items()
            if k in checks and checks[k].is_valid(v)}
    return kept or None
