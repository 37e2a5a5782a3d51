"""Code similarity that survives renaming: normalised token streams compared as sequences.

Why this form: a renamed baseline keeps its structure (the order of its operations, calls and constants) and
changes only its names, so each side's code is reduced to that structure before comparing:

- docstrings, comments, imports, asserts, decorators, type annotations and function signatures are dropped
  (``ast`` parse, then ``ast.unparse``: formatting and comments cannot matter);
- every identifier becomes ``ID``, every number ``NUM``, every string ``STR``, except the names of array
  operations, which become one canonical word for numpy, torch and math alike (``torch.linalg.vector_norm``
  and ``np.linalg.norm`` are both ``norm``; ``torch.matmul`` is ``@``). A submission may import only numpy,
  while KVPress's presses are torch: without this, a faithful numpy port of a press would look new;
- module prefixes (``np.``, ``torch.``, ``F.``) and attribute chains collapse (``layer.keys`` and ``keys``
  are both ``ID``), so reading an input through an object or a parameter does not matter.

``similarity(a, b)`` is ``difflib.SequenceMatcher``'s ratio (2 x matched tokens / all tokens) of the two
streams: 1.0 for a renamed copy, lower as code is added, removed or reordered. Known limit: padding a copy
with dead code lowers the ratio; ``covered`` (the share of the reference's tokens found in order) exposes it.
"""

from __future__ import annotations

import ast
import difflib
import io
import keyword
import tokenize
from functools import lru_cache

# canonical operation word <- names it has in numpy, torch, torch.nn.functional and math
OPS: dict[str, str] = {}
for _canon, _names in {
    "norm": ("norm", "vector_norm", "linalg_norm"), "@": ("matmul", "dot", "einsum", "bmm", "mm", "tensordot"),
    "softmax": ("softmax", "log_softmax"), "exp": ("exp",), "log": ("log",), "sqrt": ("sqrt", "rsqrt"),
    "mean": ("mean", "average", "avg"), "sum": ("sum", "nansum"), "max": ("max", "amax", "maximum", "nanmax"),
    "min": ("min", "amin", "minimum"), "argmax": ("argmax",), "pool": ("avg_pool1d", "max_pool1d", "convolve",
                                                                          "conv1d", "pool"),
    "transpose": ("transpose", "swapaxes", "permute", "T", "mT", "moveaxis"),
    "repeat": ("repeat", "repeat_kv", "repeat_interleave", "tile", "expand", "broadcast_to"),
    "topk": ("topk", "argsort", "argpartition", "sort", "partition"), "pad": ("pad",),
    "triu": ("triu", "tril"), "cat": ("cat", "concatenate", "hstack", "vstack", "stack"),
    "where": ("where", "masked_fill", "masked_fill_"), "abs": ("abs", "absolute"), "cumsum": ("cumsum",),
    "rand": ("rand", "randn", "random", "default_rng", "manual_seed", "Generator", "uniform", "normal"),
    "reshape": ("reshape", "view", "flatten", "unflatten"), "arange": ("arange",),
    "full": ("full", "full_like", "ones", "ones_like", "zeros", "zeros_like", "empty"), "clip": ("clip", "clamp",
                                                                                               "clamp_min"),
    "cos": ("cosine_similarity", "normalize"), "var": ("var", "std"), "unsqueeze": ("unsqueeze", "expand_dims"),
    "squeeze": ("squeeze",), "gather": ("gather", "take_along_axis", "index_select"), "scatter": ("scatter",
                                                                                                  "put_along_axis"),
}.items():
    for _name in _names:
        OPS[_name] = _canon
MODULES = frozenset({"np", "numpy", "torch", "F", "nn", "functional", "linalg", "math", "random", "fft"})


def _strip(tree: ast.AST) -> ast.AST:
    """Drop what carries no method: docstrings, imports, asserts, decorators, annotations, signatures, class
    headers (a press is a class with a ``score`` method, a submission a ``Method`` class)."""

    class Strip(ast.NodeTransformer):
        def generic_visit(self, node: ast.AST) -> ast.AST:
            node = super().generic_visit(node)
            body = getattr(node, "body", None)
            if isinstance(body, list):
                kept = [s for s in body if not _noise(s)]
                node.body = kept or [ast.Pass()]
            return node

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
            node = self.generic_visit(node)
            node.decorator_list, node.returns = [], None
            node.args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                      kwarg=None, defaults=[])
            return node

        def visit_ClassDef(self, node: ast.ClassDef) -> list[ast.stmt]:
            return [self.visit(s) for s in node.body if not _noise(s)]  # a class is its methods

        def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
            if node.value is None:
                return None
            return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)

    return ast.fix_missing_locations(Strip().visit(tree))


def _noise(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Assert | ast.Pass):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


@lru_cache(maxsize=256)
def normalise(source: str) -> tuple[str, ...]:
    """The structure of Python ``source`` as canonical tokens (see the module doc); raises SyntaxError."""
    text = ast.unparse(_strip(ast.parse(source)))
    raw: list[str] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    skip_dot = False
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if skip_dot and tok.string == ".":
            skip_dot = False
            continue
        skip_dot = False
        if tok.type == tokenize.NAME:
            if keyword.iskeyword(tok.string):
                raw.append(tok.string)
            elif tok.string in MODULES and nxt == ".":  # np.linalg.norm -> norm
                skip_dot = True
            else:
                raw.append(OPS.get(tok.string, "ID"))
        elif tok.type in (tokenize.NUMBER, tokenize.STRING):
            raw.append("NUM" if tok.type == tokenize.NUMBER else "STR")
        elif tok.type == tokenize.OP:
            raw.append(tok.string)
        elif tok.type in (tokenize.INDENT, tokenize.DEDENT):
            raw.append(tokenize.tok_name[tok.type])
    return tuple(_collapse_attributes(raw))


def _collapse_attributes(tokens: list[str]) -> list[str]:
    """``a.b`` -> ``ID`` and ``a.op`` -> ``op``: ``layer.keys`` reads as ``keys``, ``x.mean()`` as ``mean``."""
    out: list[str] = []
    for tok in tokens:
        if out and out[-1] == ".":
            out.pop()
            if tok != "ID" and out and out[-1] == "ID":
                out.pop()
            if tok == "ID" and out:
                continue
        out.append(tok)
    return out


def similarity(a: str | tuple[str, ...], b: str | tuple[str, ...]) -> float:
    """2 x matched / total normalised tokens of two sources (or token streams): 1.0 for a renamed copy."""
    ta, tb = (normalise(x) if isinstance(x, str) else x for x in (a, b))
    if not ta or not tb:
        return 0.0
    return difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio()


def covered(reference: str | tuple[str, ...], code: str | tuple[str, ...]) -> float:
    """Share of the reference's tokens that ``code`` contains in order (high when a copy is padded)."""
    tr, tc = (normalise(x) if isinstance(x, str) else x for x in (reference, code))
    if not tr:
        return 0.0
    blocks = difflib.SequenceMatcher(None, tr, tc, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks) / len(tr)
