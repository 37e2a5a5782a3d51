"""A submission folder and its checks, done before any of its code runs.

A submission is a folder with three files:

- ``method.py``: untrusted code defining ``class Method`` (the interface is in ``method_api``; it runs only
  in the sandbox). It may import only ``ALLOWED_IMPORTS`` (numpy, math and a few pure standard modules).
- ``DESCRIPTION.md``: the sections ``REQUIRED_SECTIONS`` as Markdown headings (``## Idea`` ...), each with text.
- ``metadata.yaml``: ``name`` (lowercase letters, digits, ``-``/``_``), ``author``, ``boards`` (a list).

A submission to a decode-time board (``DECODE_BOARDS``: board C) must define ``decode(layer)``, the call made
when the cap overflows during decoding; one to a prefill board (A, B) must define ``score`` or ``keep``.

``load_submission`` reads ``method.py`` once (``Submission.code``: the bytes hashed are the bytes that run;
editing the file afterwards changes nothing), parses it (never executes it) and raises
``SubmissionError`` whose ``kind`` says what is wrong and whose message says what to fix. The same kinds name
what goes wrong later, when the method runs (``crash``, ``timeout``, ``memory``, ``over_budget``, ...).

Identities (reserved names, authors compared by their folded keys): ``identity``.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SubmissionError
from .identity import author_key, check_identity, is_shipped
from .metadata import (  # noqa: F401 - metadata_author/origin, check_metadata: imported from here by callers
    METADATA_FILE,
    NAME_RE,
    check_allocation,
    check_metadata,
    metadata_author,
    metadata_origin,
    parse_metadata,
    read_metadata_text,
)
from .params import load_params, parse_params
from .probes import check_probes
from .safe_files import decode_text, folder_problem, read_member

METHOD_FILE, DESCRIPTION_FILE = "method.py", "DESCRIPTION.md"
METHOD_CLASS = "Method"
REQUIRED_SECTIONS = ("Idea", "Method", "Relation to prior work", "Evidence", "Limitations", "Builds on")
ALLOWED_IMPORTS = frozenset({"numpy", "math", "functools", "itertools", "collections", "heapq", "dataclasses",
                             "typing", "__future__", "statistics", "bisect", "operator", "method_api"})
NETWORK_MODULES = frozenset({"socket", "ssl", "http", "urllib", "urllib3", "requests", "ftplib", "smtplib",
                             "asyncio", "selectors", "xmlrpc", "httpx", "aiohttp"})
MAX_METHOD_BYTES = 256 * 1024
MAX_OPERATOR_RUN = 64  # operator and bracket tokens in a row (strings and comments do not count)
MAX_DESCRIPTION_BYTES = 64 * 1024  # twenty times the longest shipped DESCRIPTION.md
DECODE_BOARDS = frozenset({"C"})
@dataclass(frozen=True)
class Submission:
    """A checked submission folder; ``code_sha256`` identifies ``method.py`` in the ledger."""

    folder: Path
    name: str
    author: str
    boards: tuple[str, ...]
    code_sha256: str
    returns: str = "scores"  # "scores" when Method defines score(), "indices" for keep(), "none" for neither
    decode: bool = False  # Method defines decode(layer) (decode-time boards)
    code: bytes = field(default=b"", repr=False)  # method.py as read once and hashed
    params: bytes = field(default=b"", repr=False)  # params.npz as read once and hashed (b"": none shipped)
    params_sha256: str = ""
    probes: tuple[str, ...] = ()  # probe texts from metadata.yaml (hooks.probes)
    whole_cache: bool = False  # Method defines whole_cache(cache) (boards allowing one-off compression)
    allocation: str = "uniform"  # metadata ``allocation``: "head_adaptive" pools a layer's budget over its heads

    def __post_init__(self) -> None:
        if not self.code:
            raise ValueError("Submission needs the bytes of method.py it was hashed from (code=...)")
        if hashlib.sha256(self.code).hexdigest() != self.code_sha256:
            raise ValueError("Submission.code does not match code_sha256: the bytes that run must be the bytes hashed")
        if hashlib.sha256(self.params).hexdigest() != self.params_sha256 and (self.params or self.params_sha256):
            raise ValueError("Submission.params does not match params_sha256")

    @property
    def params_arrays(self) -> dict:
        """The parameter arrays (read-only), parsed again from the bytes hashed; {} when none are shipped."""
        return parse_params(self.params) if self.params else {}

    @property
    def identity(self) -> tuple[str, str, tuple[str, ...]]:
        """What makes two runs of this submission the same: its code, parameters and probes."""
        return self.code_sha256, self.params_sha256, self.probes

    @property
    def hooks(self) -> tuple[str, ...]:
        """The interface hooks this submission uses (``arena check`` prints them; docs/arena_submissions.md)."""
        named = (("score", self.returns == "scores"), ("keep", self.returns == "indices"), ("decode", self.decode),
                 ("whole_cache", self.whole_cache), ("params", bool(self.params)), ("probes", bool(self.probes)),
                 ("rewrite", self.rewrites), ("head_adaptive", self.allocation == "head_adaptive"))
        return tuple(h for h, on in named if on)

    @property
    def rewrites(self) -> bool:
        """method.py mentions ``Rewrite`` (the rewrite hook's return type); a hint for ``arena check`` only."""
        return b"Rewrite(" in self.code

    @property
    def source(self) -> str:
        """The code that runs: the bytes read and hashed by ``load_submission`` (never the file again)."""
        return self.code.decode("utf-8")

    @property
    def author_key(self) -> str:
        return author_key(self.author)


def load_submission(folder: str | Path, organiser: bool = False) -> Submission:
    """The checked submission in ``folder``; ``SubmissionError`` naming the first problem otherwise. The folder is
    looked at whole first (``safe_files.folder_problem``: no link, hard link or special file anywhere), then each
    file is read once, by descriptor, without following a link."""
    why = folder_problem(folder)
    if why is not None:
        raise SubmissionError("bad_folder", f"{why}; a submission folder holds only its own plain files (copy "
                                            "them in, do not link them)")
    folder = Path(folder).resolve()  # a link among its parents is followed once: every read below, the hash and
    # the run use this one real path, so what is checked is what runs (refusing linked parents would refuse
    # ordinary paths such as a linked home or /tmp)
    if not folder.is_dir():
        raise SubmissionError("missing_file", f"{folder.name} is not a folder; a submission is a folder with "
                                              f"{METHOD_FILE}, {DESCRIPTION_FILE} and {METADATA_FILE}")
    raw = {name: read_member(folder, name, cap, kind) for name, cap, kind in (
        (METHOD_FILE, MAX_METHOD_BYTES, "bad_method"), (DESCRIPTION_FILE, MAX_DESCRIPTION_BYTES, "bad_description"))}
    metadata = read_metadata_text(folder)
    for name, found in ((METHOD_FILE, raw[METHOD_FILE]), (DESCRIPTION_FILE, raw[DESCRIPTION_FILE]),
                        (METADATA_FILE, metadata)):
        if found is None:
            raise SubmissionError("missing_file", f"{folder.name} has no {name}; add it (see "
                                                  "cachecraft_lib/arena/examples/frc/ for an example)")
    check_description(decode_text(raw[DESCRIPTION_FILE], DESCRIPTION_FILE, "bad_description"))
    meta = parse_metadata(metadata)
    name, author, boards = check_metadata(meta)
    check_identity(name, author, organiser or is_shipped(folder))
    probes = check_probes(meta.get("probes"))
    code = raw[METHOD_FILE]
    returns, decode, whole = check_code_hooks(code, boards)
    params, params_sha256, _ = load_params(folder)
    if params and not _init_takes_params(code):
        raise SubmissionError("bad_method", f"the folder ships params.npz: class {METHOD_CLASS} must define "
                                            "__init__(self, params) (the arrays arrive there, read-only)")
    allocation = check_allocation(meta.get("allocation"), returns, probes, whole)
    return Submission(folder.resolve(), name, author, boards, hashlib.sha256(code).hexdigest(), returns, decode,
                      code, params, params_sha256, probes, whole, allocation)


def check_code_hooks(code: bytes, boards: tuple[str, ...]) -> tuple[str, bool, bool]:
    """``(returns, defines decode, defines whole_cache)`` of ``method.py``, checked against the boards it names:
    each board calls a hook the code defines (``whole_cache`` alone only on boards whose rules run it)."""
    returns, decode = check_hooks(code)
    whole = "whole_cache" in method_names(code)
    check_boards_hooks(boards, returns if not whole else "whole", decode)
    if whole and returns == "none":
        check_whole_cache_boards(boards)
    return returns, decode, whole


def check_whole_cache_boards(boards: tuple[str, ...]) -> None:
    """A method with only ``whole_cache`` names only boards that run it (and C, with its ``decode``)."""
    from ..boards.boards import whole_cache_boards

    other = [b for b in boards if b not in whole_cache_boards() | DECODE_BOARDS]
    if other:
        raise SubmissionError("not_allowed", f"the metadata names board(s) {other}, whose rules do not run "
                                             f"whole_cache(layers) (only {sorted(whole_cache_boards())} do): define "
                                             "score(layer) or keep(layer) for them, or name only those boards")


def check_boards_hooks(boards: tuple[str, ...], returns: str, decode: bool) -> None:
    """The hooks the declared boards call are defined: ``decode`` for C, ``score``/``keep`` for A and B."""
    if DECODE_BOARDS & set(boards) and not decode:
        raise SubmissionError("bad_method", f"the metadata names board(s) {sorted(DECODE_BOARDS & set(boards))}, "
                                            "which evict while decoding: class Method must define decode(layer) "
                                            "(see cachecraft_lib/arena/submissions/method_api.py)")
    prefill = [b for b in boards if b not in DECODE_BOARDS]
    if prefill and returns == "none":
        raise SubmissionError("bad_method", f"the metadata names prefill board(s) {prefill}: class Method must "
                                            "define score(layer) or keep(layer) for them")


def check_description(text: str) -> None:
    """Every required section is a Markdown heading followed by some text."""
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading:
            current = heading.group(1).strip().lower()
            sections[current] = ""
        elif current is not None:
            sections[current] += line.strip()
    missing = [s for s in REQUIRED_SECTIONS if s.lower() not in sections]
    empty = [s for s in REQUIRED_SECTIONS if s.lower() in sections and not sections[s.lower()]]
    if missing or empty:
        what = (f"lacks the sections {missing}" if missing else "") + (" and " if missing and empty else "") + \
               (f"has empty sections {empty}" if empty else "")
        raise SubmissionError("bad_description", f"{DESCRIPTION_FILE} {what}; it needs a heading with text for each "
                                                 f"of: {', '.join(REQUIRED_SECTIONS)}")


def check_method(code: bytes) -> str:
    """Parse ``method.py`` (without running it): a ``Method`` class with ``score`` or ``keep``, allowed imports."""
    returns, _ = check_hooks(code)
    if returns == "none":
        raise SubmissionError("bad_method", f"class {METHOD_CLASS} must define exactly one of score(layer) "
                                            "(per-token scores) or keep(layer) (indices to keep); it defines neither")
    return returns


def check_hooks(code: bytes) -> tuple[str, bool]:
    """Parse ``method.py``: ``("scores"|"indices"|"none", defines decode)``; at most one of score/keep, and at
    least one hook."""
    if len(code) > MAX_METHOD_BYTES:
        raise SubmissionError("bad_method", f"{METHOD_FILE} is {len(code)} bytes; the limit is {MAX_METHOD_BYTES}")
    tree = parse_method(code)
    for node in ast.walk(tree):
        for module in _imported(node):
            _check_import(module)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == METHOD_CLASS]
    if not classes:
        raise SubmissionError("bad_method", f"{METHOD_FILE} defines no top-level class {METHOD_CLASS} "
                                            "(see cachecraft_lib/arena/submissions/method_api.py for the interface)")
    methods = {n.name for n in classes[-1].body if isinstance(n, ast.FunctionDef)}
    hooks = methods & {"score", "keep"}
    decode = "decode" in methods
    if len(hooks) > 1 or not (hooks or decode or "whole_cache" in methods):
        raise SubmissionError("bad_method", f"class {METHOD_CLASS} must define exactly one of score(layer) "
                                            f"(per-token scores) or keep(layer) (indices to keep), and/or "
                                            f"decode(layer) for decode-time boards; it defines "
                                            f"{sorted(hooks) or 'none of them'}")
    return ("scores" if hooks == {"score"} else "indices" if hooks else "none"), decode


def parse_method(code: bytes) -> ast.Module:
    """``method.py``'s syntax tree, or ``SubmissionError("bad_method")``: every way the parser fails on hostile
    text (``SyntaxError``, ``ValueError`` for a NUL, ``MemoryError``/``RecursionError`` for a deeply nested
    expression such as 200,000 unary minus signs) is a refusal, never a traceback. Operator runs longer than
    ``MAX_OPERATOR_RUN`` are refused before parsing: no readable method needs them, and the parser's memory
    grows with them."""
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionError("bad_method", f"{METHOD_FILE} is not UTF-8 text; save it as UTF-8") from None
    if _longest_operator_run(text) > MAX_OPERATOR_RUN:
        raise SubmissionError("bad_method", f"{METHOD_FILE} has more than {MAX_OPERATOR_RUN} operator or bracket "
                                            "tokens in a row; write the expression plainly")
    try:
        return ast.parse(text, METHOD_FILE)
    except SyntaxError as err:
        raise SubmissionError("bad_method", f"{METHOD_FILE} does not parse (line {err.lineno}): {err.msg}; "
                                            "fix the syntax") from None
    except (ValueError, MemoryError, RecursionError):
        raise SubmissionError("bad_method", f"{METHOD_FILE} cannot be parsed (a NUL byte, or an expression nested "
                                            "too deeply); write it as plain, shallow Python") from None


def _longest_operator_run(text: str) -> int:
    """The most operator tokens in a row (``tokenize`` is iterative: no depth limit to trip); a text that does not
    tokenize is left to ``ast.parse`` to report."""
    longest = run = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            run = run + 1 if token.type == tokenize.OP else 0
            longest = max(longest, run)
            if longest > MAX_OPERATOR_RUN:
                break
    except (tokenize.TokenError, SyntaxError):
        pass
    return longest


def method_names(code: bytes) -> set[str]:
    """The functions class ``Method`` defines (``code`` already passed ``check_hooks``)."""
    tree = parse_method(code)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == METHOD_CLASS]
    return {n.name for n in classes[-1].body if isinstance(n, ast.FunctionDef)} if classes else set()


def _init_takes_params(code: bytes) -> bool:
    """``Method.__init__`` accepts one argument besides ``self`` (positional, or ``*args``)."""
    tree = parse_method(code)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == METHOD_CLASS]
    inits = [n for n in classes[-1].body if isinstance(n, ast.FunctionDef) and n.name == "__init__"] if classes else []
    if not inits:
        return False
    args = inits[-1].args
    return len(args.posonlyargs) + len(args.args) >= 2 or args.vararg is not None


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else ["." * node.level + (node.module or "")]
    return []


def _check_import(module: str) -> None:
    top = module.split(".")[0]
    if top in ALLOWED_IMPORTS:
        return
    if top in NETWORK_MODULES:
        raise SubmissionError("network", f"{METHOD_FILE} imports {module}: a method has no network access")
    if top in {"os", "io", "pathlib", "shutil", "subprocess", "glob", "tempfile", "sys", "builtins", "ctypes",
               "pickle", "importlib", "mmap", "fcntl"}:
        raise SubmissionError("file_access", f"{METHOD_FILE} imports {module}: a method may not touch files, "
                                             "processes or the interpreter")
    raise SubmissionError("bad_import", f"{METHOD_FILE} imports {module}; a method may import only "
                                        f"{', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))}")
