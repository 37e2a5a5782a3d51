"""Stage 0: what can be checked without running a candidate (parse, imports, functions, EVOLVE-BLOCK)."""

from __future__ import annotations

import ast

ALLOWED_IMPORTS = {"numpy", "math", "functools", "itertools", "cachecraft_lib.policy"}
FORBIDDEN_NAMES = {"exec", "eval", "open", "compile", "__import__", "globals", "locals", "breakpoint", "input"}
START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"


def outside_block(source: str) -> str:
    """The program text outside its EVOLVE-BLOCK (trailing spaces ignored)."""
    lines = source.splitlines()
    out, inside = [], False
    for line in lines:
        if line.strip() == START:
            inside = True
            out.append(line.strip())
        elif line.strip() == END:
            inside = False
            out.append(line.strip())
        elif not inside:
            out.append(line.rstrip())
    return "\n".join(out).strip()


def stage0(source: str, seed_source: str | None = None) -> list[str]:
    """Reasons the program is invalid before it runs (empty list = passes)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return [f"syntax error at line {err.lineno}: {err.msg}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if a.name not in ALLOWED_IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            bad = [node.module or "."] if (node.module or "") not in ALLOWED_IMPORTS or node.level else []
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            bad = [f"call of {node.id}()"]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__"):
            bad = [f"dunder attribute {node.attr}"]
        else:
            continue
        problems += [f"not allowed: {b} (allowed imports: {', '.join(sorted(ALLOWED_IMPORTS))})" for b in bad]
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("score_tokens", "select_tokens_to_keep"):
        if name not in defined:
            problems.append(f"does not define {name}() at module level")
    if START not in source or END not in source:
        problems.append("the EVOLVE-BLOCK markers are missing")
    elif seed_source is not None and outside_block(source) != outside_block(seed_source):
        problems.append("edited outside the EVOLVE-BLOCK (only the block may change)")
    return problems
