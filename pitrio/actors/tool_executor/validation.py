"""Tool-argument validation (spec §2.3): convert loose scalars, check the schema, pi's message.

Models often send ``"5"`` for a number or ``"true"`` for a boolean. Like pi (TypeBox's
``Value.Convert``) the arguments are first converted toward the schema's types, then checked
with JSON Schema; a failure reads::

    Validation failed for tool "read":
      - path: must have required properties path

    Received arguments:
    {}

with one ``  - <path>: <message>`` line per problem, in pi's wording. Pure: no I/O.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pitrio.actors.tool_executor.jsvalues import (
    js_number_to_string,
    js_parse_number,
    json_stringify_pretty,
)
from pitrio.errors import ToolArgumentsError

if TYPE_CHECKING:
    # jsonschema ships no type information; its objects are typed as Any here.
    import jsonschema.exceptions  # type: ignore[import-untyped]
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


# -- conversion -------------------------------------------------------------------------


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [item for item in kind if isinstance(item, str)]
    return []


def _matches(value: Any, kind: str) -> bool:
    match kind:
        case "string":
            return isinstance(value, str)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "integer":
            return (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and float(value).is_integer()
            )
        case "boolean":
            return isinstance(value, bool)
        case "null":
            return value is None
        case "array":
            return isinstance(value, list)
        case "object":
            return isinstance(value, dict)
    return False


def _as_int(number: float) -> int | float:
    return int(number) if math.isfinite(number) else number


def _convert_scalar(value: Any, kind: str) -> Any:
    """One conversion step toward ``kind``; returns ``value`` itself when none applies."""
    if kind in ("number", "integer"):
        number: float | None = None
        if value is None:
            number = 0.0
        elif isinstance(value, bool):
            number = 1.0 if value else 0.0
        elif isinstance(value, str):
            number = js_parse_number(value)
        elif isinstance(value, float) and kind == "integer" and math.isfinite(value):
            number = float(math.trunc(value))
        if number is None:
            return value
        if kind == "integer":
            return math.trunc(number)
        return _as_int(number) if number.is_integer() else number
    if kind == "boolean":
        if value is None:
            return False
        if isinstance(value, str):
            lowered = value.lower()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0"):
                return False
        if isinstance(value, int | float) and not isinstance(value, bool) and value in (0, 1):
            return value == 1
        return value
    if kind == "string":
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return js_number_to_string(value)
        return value
    if kind == "null" and isinstance(value, str) and value in ("", "null"):
        return None
    if kind == "array" and isinstance(value, str | int | float | bool):
        return [value]
    return value


def convert(value: Any, schema: Any) -> Any:
    """Convert ``value`` toward ``schema``'s types, recursing into objects and arrays.

    Mirrors what pi's validation accepts: numeric strings (``"5"``, ``" 5 "``, ``"0x10"``) for
    numbers, ``"true"``/``"1"`` for booleans, numbers and booleans for strings, a scalar for a
    one-item array, a float truncated for an integer.
    """
    if not isinstance(schema, Mapping):
        return value
    for nested in schema.get("allOf", ()):
        value = convert(value, nested)
    kinds = _types(schema)
    if kinds and not any(_matches(value, kind) for kind in kinds):
        for kind in kinds:
            converted = _convert_scalar(value, kind)
            if converted is not value:
                value = converted
                break
    elif kinds == ["integer"] and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for key, sub in properties.items():
                if key in value:
                    value[key] = convert(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            known = set(properties or ())
            for key in list(value):
                if key not in known:
                    value[key] = convert(value[key], extra)
    elif isinstance(value, list):
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        for index in range(len(value)):
            if isinstance(prefix, list) and index < len(prefix):
                value[index] = convert(value[index], prefix[index])
            elif isinstance(items, Mapping):
                value[index] = convert(value[index], items)
    return value


# -- messages ---------------------------------------------------------------------------


def _dotted(path: Iterator[Any] | Any) -> str:
    return ".".join(str(part) for part in path)


def _number(value: Any) -> str:
    return js_number_to_string(value) if isinstance(value, int | float) else str(value)


def _message(error: jsonschema.exceptions.ValidationError) -> str:
    """pi's (TypeBox's) wording for one failed keyword."""
    value = error.validator_value
    match error.validator:
        case "type":
            kinds = value if isinstance(value, list) else [value]
            return "must be " + ",".join(str(kind) for kind in kinds)
        case "minimum":
            return f"must be >= {_number(value)}"
        case "maximum":
            return f"must be <= {_number(value)}"
        case "exclusiveMinimum":
            return f"must be > {_number(value)}"
        case "exclusiveMaximum":
            return f"must be < {_number(value)}"
        case "minLength":
            return f"must not have fewer than {value} characters"
        case "maxLength":
            return f"must not have more than {value} characters"
        case "minItems":
            return f"must not have fewer than {value} items"
        case "maxItems":
            return f"must not have more than {value} items"
        case "minProperties":
            return f"must not have fewer than {value} properties"
        case "maxProperties":
            return f"must not have more than {value} properties"
        case "pattern":
            return f'must match pattern "{value}"'
        case "enum":
            return "must be equal to one of the allowed values"
        case "const":
            return "must be equal to constant"
        case "anyOf":
            return "must match a schema in anyOf"
        case "oneOf":
            return "must match exactly one schema in oneOf"
        case "multipleOf":
            return f"must be multiple of {_number(value)}"
        case "uniqueItems":
            return "must not have duplicate items"
        case "format":
            return f'must match format "{value}"'
        case "not":
            return "must not be valid"
        case "false":
            return "schema is false"
    return str(error.message)


def _extra_keys(error: jsonschema.exceptions.ValidationError) -> list[str]:
    instance = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    known = set(schema.get("properties") or ())
    patterns = list(schema.get("patternProperties") or ())
    if not isinstance(instance, dict):
        return []
    return [
        key
        for key in instance
        if key not in known and not any(re.search(pattern, key) for pattern in patterns)
    ]


def _lines(errors: Iterator[jsonschema.exceptions.ValidationError]) -> list[str]:
    """One ``  - <path>: <message>`` line per problem, in the order the schema was walked."""
    lines: list[str] = []
    missing: dict[tuple[Any, ...], list[str]] = {}
    missing_at: dict[tuple[Any, ...], int] = {}
    for error in errors:
        path = tuple(error.absolute_path)
        base = _dotted(path)
        if error.validator == "required":
            # pi reports all missing properties of one object in a single line, under the
            # path of the first one.
            name = error.message.split("'")[1] if "'" in error.message else str(error.message)
            if path not in missing:
                missing[path] = []
                missing_at[path] = len(lines)
                lines.append("")
            missing[path].append(name)
            continue
        if error.validator == "additionalProperties" and error.validator_value is False:
            for key in _extra_keys(error):
                lines.append(f"  - {_dotted((*path, key))}: schema is false")
            lines.append(f"  - {base or 'root'}: must not have additional properties")
            continue
        if error.validator in ("anyOf", "oneOf"):
            for sub in error.context or ():
                lines.append(f"  - {_dotted(sub.absolute_path) or 'root'}: {_message(sub)}")
        lines.append(f"  - {base or 'root'}: {_message(error)}")
    for path, names in missing.items():
        first = _dotted((*path, names[0]))
        lines[missing_at[path]] = f"  - {first}: must have required properties {', '.join(names)}"
    return lines


def validate_tool_arguments(tool_name: str, schema: Mapping[str, Any], args: Any) -> Any:
    """Return the converted arguments, or raise :class:`ToolArgumentsError` with pi's text.

    ``args`` is not modified; the ``Received arguments`` block shows it as it was given.
    """
    converted = convert(copy.deepcopy(args), schema)
    validator = _validator(schema)
    lines = _lines(validator.iter_errors(converted))
    if not lines:
        return converted
    listed = "\n".join(lines)
    raise ToolArgumentsError(
        f'Validation failed for tool "{tool_name}":\n{listed}\n\n'
        f"Received arguments:\n{json_stringify_pretty(args)}"
    )
