"""Digests of a program's code that a re-entry under cosmetic changes cannot escape (``plan_looks`` counts looks by them).

Why: every test look at a program counts against a pre-registered claim on it, so the look must be recognised
when the program comes back changed only in form. ``code_digest`` (recorded as ``program_ast``/``code_ast``)
is the SHA-256 of the syntax tree without docstrings: comments, layout and docstrings aside. A second red team
(2026-12-05) re-entered a program with its local names renamed, which that digest misses. ``shape_digest``
(``program_shape``/``code_shape``) also renames, canonically in order of first appearance (a deterministic walk
of the tree), every name the program itself binds:

- function-local names (arguments, assignments, loop/with/except targets, nested functions), per scope, so one
  name renamed differently in two functions is still caught; module-level names (constants, functions,
  classes, the local name of an import: ``import numpy as np`` and ``import numpy`` are one program);
- attribute names the program defines (stored on an object, or bound in a class body: ``self.w``, a method's
  name), and keyword arguments of calls to the program's own functions and methods.

Kept as written: what comes from outside, since it is what the program calls, not what it is named: builtins
and other free names, imported module paths and imported names (``from m import f`` binds ``f``, whose local
name is canonicalised, but ``m`` and ``f`` as the import's source are kept), attributes the program only reads
(``np.zeros``, ``ctx.L``), keyword arguments of other callables (``mode="same"``), dunder names and string
constants. Canonicalising those would make two programs calling different functions one look. A program
rewritten in another form (a loop unrolled, a helper inlined, a name reached by ``getattr`` with a string) has
another shape: ``behaviour``'s digest and sketch of what it keeps on the round's test contexts see it.
"""

from __future__ import annotations

import ast
import hashlib

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _parsed(code: bytes) -> ast.Module | None:
    """The tree without docstrings (module, class, function), or None when the code does not parse. It parses
    the UTF-8 text, the text that runs (``Submission.source``): ``ast.parse`` of the bytes would honour a
    ``# coding:`` line the sandbox never does (third red team: ``# coding: nonexistent`` left no digest)."""
    try:
        tree = ast.parse(code.decode("utf-8"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # UnicodeDecodeError is a ValueError
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def code_digest(code: bytes) -> str | None:
    """SHA-256 of ``method.py``'s syntax tree without docstrings (``ast.dump``: no comments, layout or line
    numbers): a program re-entered with a comment or docstring changed is the same look (``plan_looks``).
    None when the code does not parse."""
    tree = _parsed(code)
    try:
        return None if tree is None else hashlib.sha256(ast.dump(tree).encode()).hexdigest()
    except (RecursionError, MemoryError):  # a program nested past the stack (``a+a+...+a``): no digest, refused
        return None


def shape_digest(code: bytes) -> str | None:
    """SHA-256 of the tree without docstrings and with the program's own names canonical (module doc): a
    program re-entered with its names consistently renamed is the same look. None when it does not parse."""
    tree = _parsed(code)
    if tree is None:
        return None
    try:
        _Canon(tree).visit(tree)
        return hashlib.sha256(("shape:" + ast.dump(tree)).encode()).hexdigest()
    except (RecursionError, MemoryError):
        return None


def look_digests(code: bytes) -> dict[str, str]:
    """What a ``test_look`` records of its program besides its SHA-256: ``program_ast`` and ``program_shape``."""
    found = {"program_ast": code_digest(code), "program_shape": shape_digest(code)}
    return {k: v for k, v in found.items() if v}


def checked_digests(code: bytes) -> dict[str, str]:
    """``look_digests`` of a submission's ``method.py``, both present; ``SubmissionError`` otherwise (a program
    the arena cannot digest is a look no claim could recognise, so it is refused before it runs)."""
    from ..submissions.errors import SubmissionError

    found = look_digests(code)
    if set(found) != {"program_ast", "program_shape"}:
        raise SubmissionError("bad_method", "method.py could not be digested (it is not UTF-8 Python that parses, "
                              "or it is nested too deeply to walk, e.g. a very long a+a+...+a): the arena records "
                              "a digest of every program it runs, so it cannot take this one; simplify it")
    return found


def _own(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``node``'s scope, nested scopes' bodies left out (their names, defaults and decorators in)."""
    out, todo = [], list(ast.iter_child_nodes(node))
    while todo:
        child = todo.pop()
        out.append(child)
        if isinstance(child, SCOPES):
            todo.extend(getattr(child, "decorator_list", []) + getattr(child, "bases", []))
            args = getattr(child, "args", None)
            todo.extend((args.defaults + [d for d in args.kw_defaults if d]) if isinstance(args, ast.arguments) else [])
        else:
            todo.extend(ast.iter_child_nodes(child))
    return out


def _bound(node: ast.AST) -> set[str]:
    """The names ``node``'s scope binds (less those it declares global or nonlocal)."""
    names, declared = set(), set()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        a = node.args
        names |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
    for n in _own(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            declared |= set(n.names)
    return names - declared


def _defined_attrs(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(attribute names the program defines, names of its own callables): module doc."""
    attrs, callables = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
            attrs.add(n.attr)
        elif isinstance(n, ast.ClassDef):
            attrs |= _bound(n)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            callables.add(n.name)
    dunder = {a for a in attrs | callables if a.startswith("__") and a.endswith("__")}
    return attrs - dunder, callables - dunder


class _Canon(ast.NodeTransformer):
    """Renames in place, in the order the walk meets the names (the same for a consistently renamed program)."""

    def __init__(self, tree: ast.Module) -> None:
        self.attrs, self.callables = _defined_attrs(tree)
        self.maps: dict[str, dict[str, str]] = {"a": {}, "k": {}}
        self.scopes: list[tuple[str, set[str], dict[str, str]]] = [("g", _bound(tree), {})]

    @staticmethod
    def _canon(table: dict[str, str], name: str, prefix: str) -> str:
        return table.setdefault(name, f"{prefix}{len(table)}")

    def _name(self, name: str) -> str:
        """The canonical name ``name`` resolves to from the current scope (Python's rule: class scopes are
        skipped from inside their functions), or ``name`` when the program does not bind it."""
        for depth in range(len(self.scopes) - 1, -1, -1):
            kind, bound, table = self.scopes[depth]
            if kind == "c" and depth != len(self.scopes) - 1 or name not in bound:
                continue
            return self._canon(self.maps["a"], name, "a") if kind == "c" else self._canon(table, name, f"{kind}{depth}_")
        return name

    def _scope(self, node: ast.AST, kind: str) -> ast.AST:
        if hasattr(node, "name"):
            node.name = self._name(node.name)
        for part in getattr(node, "decorator_list", []) + getattr(node, "bases", []) + getattr(node, "keywords", []):
            self.visit(part)
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            for d in args.defaults + [d for d in args.kw_defaults if d]:
                self.visit(d)
        self.scopes.append((kind, _bound(node), {}))
        if isinstance(args, ast.arguments):
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a:
                    a.arg = self._name(a.arg)
                    a.annotation = self.visit(a.annotation) if a.annotation else None
        node.body = [self.visit(b) for b in node.body] if isinstance(node.body, list) else self.visit(node.body)
        self.scopes.pop()
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:  # noqa: N802 (ast's visitor names)
        return self._scope(node, "f")

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef  # noqa: N815

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:  # noqa: N802
        return self._scope(node, "c")

    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802
        node.id = self._name(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        if node.attr in self.attrs:
            node.attr = self._canon(self.maps["a"], node.attr, "a")
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802
        f = node.func
        own = isinstance(f, ast.Name) and f.id in self.callables or isinstance(f, ast.Attribute) and f.attr in self.callables
        self.generic_visit(node)
        for k in node.keywords if own else []:
            k.arg = self._canon(self.maps["k"], k.arg, "k") if k.arg else None
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:  # noqa: N802
        node.asname = self._name(node.asname or node.name.split(".")[0])
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:  # noqa: N802
        node.name = self._name(node.name) if node.name else None
        return self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> ast.AST:  # noqa: N802
        node.names = [self._name(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global  # noqa: N815
