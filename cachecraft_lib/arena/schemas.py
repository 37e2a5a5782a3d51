"""The arena's one way of checking structured input: JSON Schema, with jsonschema (issue 59).

Why one: the board files were read by dacite, a judge's JSON answer checked by jsonschema and a submission's
``origin`` by a hand-written map of types: three sets of rules for what a valid value is (is ``True`` an
integer? is ``3.0``?) and three styles of error. Now each input has a schema, checked by ``validator`` (an
integer is an int and never a bool; a number is an int or a float, never a bool), and the typed value is built
from data that has passed it (``build``). A dataclass's schema is written from its type hints (``schema_of``),
so a board's fields are declared once, on ``Board``.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import jsonschema

_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
    "integer": lambda _, v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda _, v: isinstance(v, int | float) and not isinstance(v, bool),
})
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)
_JSON = {str: "string", int: "integer", float: "number", bool: "boolean"}


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator of ``schema`` with the arena's types (no bool where a number is due)."""
    return _Validator(schema)


def first_error(schema: dict[str, Any], data: Any) -> jsonschema.ValidationError | None:
    """The most relevant way ``data`` breaks ``schema`` (jsonschema's ``best_match``), None when it is valid."""
    return jsonschema.exceptions.best_match(validator(schema).iter_errors(data))


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON schema of a type hint: str/int/float/bool, ``Literal`` (an enum), ``tuple[X, ...]`` (an array),
    ``dict[str, X]`` (an object), ``X | None``, ``Any``, and a dataclass (an object of its fields, those without a
    default required, no others allowed)."""
    if dataclasses.is_dataclass(hint):
        hints = get_type_hints(hint)
        fields = dataclasses.fields(hint)
        required = [f.name for f in fields if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        return {"type": "object", "additionalProperties": False, "required": required,
                "properties": {f.name: schema_of(hints[f.name]) for f in fields}}
    if hint is Any:
        return {}
    if hint in _JSON:
        return {"type": _JSON[hint]}
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if _is_union(hint):
        return {"anyOf": [schema_of(a) if a is not type(None) else {"type": "null"} for a in args]}
    if origin is tuple:
        return {"type": "array", "items": schema_of(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": schema_of(args[1]) if len(args) == 2 else {}}
    raise TypeError(f"no JSON schema for {hint!r}")


def build(hint: Any, value: Any) -> Any:
    """``value`` (valid against ``schema_of(hint)``) as ``hint``: dataclasses built from their fields, arrays as
    tuples, an int where a float is due as a float."""
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        hints = get_type_hints(hint)
        return hint(**{k: build(hints[k], v) for k, v in value.items()})
    origin, args = get_origin(hint), get_args(hint)
    if _is_union(hint):
        inner = [a for a in args if a is not type(None)]
        return value if value is None or len(inner) != 1 else build(inner[0], value)
    if origin is tuple and isinstance(value, list | tuple):
        return tuple(build(args[0], v) for v in value) if args else tuple(value)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {k: build(args[1], v) for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def path_of(err: jsonschema.ValidationError) -> str:
    """Where an error is, as dotted field names (``limits.mode``; a list position as its index)."""
    return ".".join(str(p) for p in err.absolute_path)


WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
         "array": "a list", "object": "a mapping", "null": "null (left out)"}


def expected(schema: dict[str, Any]) -> str:
    """What a schema asks for, in words for whoever writes the file (an error message's "must be ...")."""
    if "enum" in schema:
        return f"one of {tuple(schema['enum'])}"
    if "anyOf" in schema:
        return " or ".join(expected(s) for s in schema["anyOf"])
    kind = schema.get("type")
    return WORDS.get(kind, f"of type {kind}") if kind else "valid"
