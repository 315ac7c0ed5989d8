"""Tool-argument validation (spec §2.3): coerce loose values, check the schema, pi's message.

pi 1.6.0 validates with pi-schema: the arguments are coerced toward the schema first, in three
passes, then checked; a failure reads::

    Validation failed for tool "read":
      - path: missing

    Received arguments:
    {}

with one ``  - <path>: <message>`` line per failing keyword (``root`` for the arguments
themselves), in the order the schema is walked. The coercion passes:

1. an optional property set to ``null`` whose schema rejects ``null`` is dropped, as if
   omitted (what a strict tool declaration makes the model send for "absent");
2. conversions keyed on the schema (``const``, ``enum``, unions, ``allOf``, then ``type``):
   numeric strings and booleans to numbers, ``"true"``/``"1"`` to booleans, scalars to
   strings, a single value to a one-item array, a union keeps a value one branch accepts or
   takes the first branch's conversion the whole union accepts;
3. primitive coercion by ``type`` for what pass 2 left (type arrays such as
   ``["integer", "null"]``).

Pure: no I/O. The arguments given are never modified.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pitrio.actors.tool_executor.jsvalues import (
    js_number_to_string,
    js_parse_number,
    json_stringify_pretty,
)
from pitrio.actors.tool_executor.validation_explain import explain
from pitrio.errors import ToolArgumentsError

if TYPE_CHECKING:
    # jsonschema ships no type information; its objects are typed as Any here.
    import jsonschema.protocols  # type: ignore[import-untyped]
# jsonschema itself (~45 ms to import) is imported by the first validation, not at start-up
# (issue 7, cold start).

_CACHE_SIZE = 256
_validators: dict[int, tuple[Mapping[str, Any], jsonschema.protocols.Validator]] = {}


def _validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A compiled validator per schema object; schemas are long-lived tool constants."""
    cached = _validators.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    import jsonschema.validators  # type: ignore[import-untyped]

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema)
    if len(_validators) >= _CACHE_SIZE:
        _validators.pop(next(iter(_validators)))
    _validators[id(schema)] = (schema, validator)  # holds the schema, so its id stays unique
    return validator


class _Schema:
    """One tool schema's checks of its sub-schemas (``$ref`` resolves against the root)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = _validator(root)

    def ok(self, node: Any, value: Any) -> bool:
        if node is True or node is None:
            return True
        if node is False:
            return False
        if not isinstance(node, Mapping):
            return True
        try:
            return bool(self.root.evolve(schema=node).is_valid(value))
        except Exception:
            return True

    def target(self, node: Mapping[str, Any]) -> Any:
        """The schema a local ``$ref`` names, or ``None``."""
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return None
        try:
            # jsonschema's referencing resolver for the root (its public ``resolver`` is the
            # deprecated RefResolver).
            return self.root._resolver.lookup(ref).contents
        except Exception:
            return None


# -- values ------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _matches(value: Any, kind: str) -> bool:
    match kind:
        case "string":
            return isinstance(value, str)
        case "number":
            return _finite(value)
        case "integer":
            return _finite(value) and float(value).is_integer()
        case "boolean":
            return isinstance(value, bool)
        case "null":
            return value is None
        case "array":
            return isinstance(value, list)
        case "object":
            return isinstance(value, dict)
    return False


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [item for item in kind if isinstance(item, str)]
    return []


def _num(number: float) -> int | float:
    """A JavaScript number as Python holds it best: whole values as ``int``."""
    if math.isfinite(number) and float(number).is_integer():
        return int(number)
    return number


_MISS = object()


def _to_string(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if _finite(value):
        return js_number_to_string(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return _MISS


def _to_number(value: Any) -> Any:
    if isinstance(value, bool):
        return 1 if value else 0
    if _finite(value):
        return value
    if value is None:
        return 0
    if not isinstance(value, str):
        return _MISS
    number = js_parse_number(value)
    if number is not None:
        return _num(number)
    lowered = value.lower()
    if lowered in ("false", "true"):
        return 1 if lowered == "true" else 0
    match = re.fullmatch(r"(-?(?:0|[1-9]\d*))(?:n|\.\d+)?", value)
    return int(match.group(1)) if match else _MISS


def _to_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if _finite(value):
        return {0: False, 1: True}.get(value, _MISS)
    if value is None:
        return False
    if not isinstance(value, str):
        return _MISS
    lowered = value.lower()
    if lowered == "false" or value == "0":
        return False
    if lowered == "true" or value == "1":
        return True
    return _MISS


def _to_null(value: Any) -> Any:
    if value is None or value is False or (_finite(value) and value == 0):
        return None
    if isinstance(value, str) and (value.lower() in ("undefined", "null") or value in ("", "0")):
        return None
    return _MISS


def _literal(literal: Any, value: Any) -> Any:
    """``value`` converted to ``literal`` (a const or enum member) when it converts exactly."""
    if _same(literal, value):
        return value
    if isinstance(literal, bool):
        result = _to_boolean(value)
    elif isinstance(literal, str):
        result = _to_string(value)
    elif _is_number(literal):
        result = _to_number(value)
    else:
        return value
    return result if result is not _MISS and _same(result, literal) else value


def _same(a: Any, b: Any) -> bool:
    """JavaScript's ``===`` for JSON scalars (``1 === true`` is false)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return type(a) is type(b) and a == b if not (_is_number(a) and _is_number(b)) else a == b


# -- pass 1: optional nulls ----------------------------------------------------------------


def _item_schema(schema: Mapping[str, Any], index: int) -> Any:
    items = schema.get("items")
    if isinstance(items, list):
        return items[index] if index < len(items) else None
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    return items


def _drop_nulls(check: _Schema, value: Any, schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, list):
        return [
            item if (sub := _item_schema(schema, i)) is None else _drop_nulls(check, item, sub)
            for i, item in enumerate(value)
        ]
    if not isinstance(value, dict):
        return value
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, Mapping) else {}
    extra = schema.get("additionalProperties")
    extra = extra if isinstance(extra, Mapping) else None
    required = set(schema.get("required") or ())
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties.get(key)
        if key in properties:
            is_ref = isinstance(sub, Mapping) and isinstance(sub.get("$ref"), str)
            if item is None and key not in required and not is_ref and not check.ok(sub, None):
                continue
            item = _drop_nulls(check, item, sub)
        else:
            matched = False
            for pattern, sub in patterns.items():
                if re.search(pattern, key):
                    matched = True
                    item = _drop_nulls(check, item, sub)
            if not matched and extra is not None:
                item = _drop_nulls(check, item, extra)
        out[key] = item
    return out


# -- pass 2: conversions -------------------------------------------------------------------


def _convert(check: _Schema, node: Any, value: Any, depth: int = 0) -> Any:
    if not isinstance(node, Mapping) or depth > 64:  # a recursive schema stops converting
        return value
    if "$ref" in node:
        target = check.target(node)
        return value if target is None else _convert(check, target, value, depth + 1)
    if "const" in node:
        return _literal(node["const"], value)
    if isinstance(node.get("enum"), list):
        members = node["enum"]
        if any(_same(member, value) for member in members):
            return value
        for member in members:
            candidate = _literal(member, value)
            if candidate is not value and check.ok(node, candidate):
                return candidate
        return value
    for union in ("anyOf", "oneOf"):
        branches = node.get(union)
        if isinstance(branches, list):
            if any(check.ok(branch, value) for branch in branches):
                return _members(check, node, value, depth)
            for branch in branches:
                candidate = _members(check, node, _convert(check, branch, value, depth + 1), depth)
                if check.ok(node, candidate):
                    return candidate
            return _members(check, node, value, depth)
    if isinstance(node.get("allOf"), list):
        for member in node["allOf"]:
            value = _convert(check, member, value, depth + 1)
        return _members(check, node, value, depth)
    kind = node.get("type")
    if kind == "string":
        result = _to_string(value)
    elif kind == "number":
        result = _to_number(value)
    elif kind == "integer":
        result = _to_number(value)
        if result is not _MISS:
            result = math.trunc(result)
    elif kind == "boolean":
        result = _to_boolean(value)
    elif kind == "null":
        result = _to_null(value)
    elif kind == "array" or (
        kind is None and "properties" not in node and ("items" in node or "prefixItems" in node)
    ):
        return _convert_array(check, node, value, depth)
    elif kind == "object" or (
        kind is None and ("properties" in node or "patternProperties" in node)
    ):
        return _convert_object(check, node, value, depth)
    else:
        return value
    return value if result is _MISS else result


def _members(check: _Schema, node: Mapping[str, Any], value: Any, depth: int) -> Any:
    declares = any(k in node for k in ("properties", "patternProperties", "additionalProperties"))
    return _convert_object(check, node, value, depth) if declares else value


def _convert_array(check: _Schema, node: Mapping[str, Any], value: Any, depth: int) -> Any:
    items = node.get("items")
    prefix = items if isinstance(items, list) else node.get("prefixItems")
    if isinstance(prefix, list):
        if not isinstance(value, list):
            return value  # a tuple never wraps a single value
        rest = None if isinstance(items, list) else items
        return [
            _convert(check, prefix[i] if i < len(prefix) else rest, item, depth + 1)
            for i, item in enumerate(value)
        ]
    if isinstance(value, list):
        return [_convert(check, items, item, depth + 1) for item in value]
    return [_convert(check, items, value, depth + 1)]


def _convert_object(check: _Schema, node: Mapping[str, Any], value: Any, depth: int) -> Any:
    if not isinstance(value, dict):
        return value
    properties = node.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    patterns = node.get("patternProperties")
    patterns = patterns if isinstance(patterns, Mapping) else {}
    extra = node.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        matched = key in properties
        if matched:
            item = _convert(check, properties[key], item, depth + 1)
        for pattern, sub in patterns.items():
            if re.search(pattern, key):
                matched = True
                item = _convert(check, sub, item, depth + 1)
        if not matched and isinstance(extra, Mapping):
            item = _convert(check, extra, item, depth + 1)
        out[key] = item
    return out


# -- pass 3: primitive coercion by type ----------------------------------------------------


def _coerce_primitive(value: Any, kind: str) -> Any:
    if kind in ("number", "integer"):
        if value is None:
            return 0
        if isinstance(value, str) and value.strip():
            parsed = js_parse_number(value)
            if parsed is not None and (kind == "number" or parsed.is_integer()):
                return _num(parsed)
        if isinstance(value, bool):
            return 1 if value else 0
        return value
    if kind == "boolean":
        if value is None:
            return False
        if value == "true" or (_is_number(value) and value == 1):
            return True
        if value == "false" or (_is_number(value) and value == 0):
            return False
        return value
    if kind == "string":
        if value is None:
            return ""
        if isinstance(value, bool) or _is_number(value):
            return _to_string(value)
        return value
    if kind == "null" and (value == "" or value is False or (_is_number(value) and value == 0)):
        return None
    return value


def _coerce_types(check: _Schema, value: Any, schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    for member in schema.get("allOf") or ():
        value = _coerce_types(check, value, member)
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union)
        if isinstance(branches, list) and not any(check.ok(b, value) for b in branches):
            for branch in branches:
                coerced = _coerce_types(check, value, branch)
                if check.ok(branch, coerced):
                    value = coerced
                    break
    kinds = _types(schema)
    if kinds and not (len(kinds) > 1 and any(_matches(value, kind) for kind in kinds)):
        for kind in kinds:
            candidate = _coerce_primitive(value, kind)
            if candidate is not value:
                value = candidate
                break
    if "object" in kinds and isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, Mapping) else {}
        extra = schema.get("additionalProperties")
        out = dict(value)
        for key in value:
            matched = key in properties
            if matched:
                out[key] = _coerce_types(check, out[key], properties[key])
            for pattern, sub in patterns.items():
                if re.search(pattern, key):
                    matched = True
                    out[key] = _coerce_types(check, out[key], sub)
            if not matched and isinstance(extra, Mapping):
                out[key] = _coerce_types(check, out[key], extra)
        value = out
    if "array" in kinds and isinstance(value, list):
        value = [
            item
            if not isinstance(sub := _item_schema(schema, i), Mapping)
            else _coerce_types(check, item, sub)
            for i, item in enumerate(value)
        ]
    return value


def coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` coerced toward ``schema`` (the three passes); ``value`` is not modified."""
    check = _Schema(schema)
    copied = copy.deepcopy(value)
    return _coerce_types(check, _convert(check, schema, _drop_nulls(check, copied, schema)), schema)


convert = coerce
"""The name this module's coercion had before pi 1.6.0 (TypeBox's ``Value.Convert``)."""


def validate_tool_arguments(tool_name: str, schema: Mapping[str, Any], args: Any) -> Any:
    """Return the coerced arguments, or raise :class:`ToolArgumentsError` with pi's text.

    ``args`` is not modified; the ``Received arguments`` block shows it as it was given.
    """
    coerced = coerce(args, schema)
    validator = _validator(schema)
    if validator.is_valid(coerced):
        return coerced
    errors = explain(_Schema(schema), schema, coerced)
    listed = "\n".join(f"  - {'.'.join(path) or 'root'}: {message}" for path, message in errors)
    raise ToolArgumentsError(
        f'Validation failed for tool "{tool_name}":\n{listed}\n\n'
        f"Received arguments:\n{json_stringify_pretty(args)}"
    )


__all__ = ["coerce", "convert", "validate_tool_arguments"]
