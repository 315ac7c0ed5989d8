"""Checking a JSON document against one of pi 1.6.0's published schemas (``models.json``,
``settings.json``) and saying what went wrong in pitrio's words.

``jsonschema`` (Draft 2020-12) is imported with the first document checked, and each schema is
read once per process. A document that passed before (in this process or an earlier one,
:mod:`.schema_verdicts`) passes without it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from pitrio.actors.schema_verdicts import passed_before, remember_pass, verdict_key


def kind_of(value: Any) -> str:
    """How a problem names a JSON value (``the number 3``, ``a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    return "an object"


@functools.cache
def validator(schema_path: Path) -> Any:
    """The Draft 2020-12 validator of the schema in ``schema_path`` (read once)."""
    import jsonschema  # type: ignore[import-untyped]  # with the first document checked only

    schema = orjson.loads(schema_path.read_bytes())
    return jsonschema.Draft202012Validator(schema)


_TYPE_NAMES = {
    "string": "a string",
    "object": "an object",
    "array": "a list",
    "boolean": "true or false",
    "number": "a number",
    "integer": "an integer",
    "null": "null",
}

_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: pi's schemas bound integer settings by it."""


def json_path(parts: Iterable[Any]) -> str:
    """``a.b[0].c`` for the path ``["a", "b", 0, "c"]``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def expected(error: Any) -> str:
    """What the schema expected where ``error`` happened, in pitrio's words."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    kind = error.validator
    if kind == "required":
        return "required"
    if kind == "type":
        names = error.validator_value
        names = names if isinstance(names, list) else [names]
        if "number" in names and schema.get("exclusiveMinimum") == 0:
            wanted = "a positive number"
        elif names == ["integer"] and schema.get("minimum") == 0:
            wanted = "a whole number of at least 0"
        else:
            wanted = " or ".join(_TYPE_NAMES.get(str(name), str(name)) for name in names)
        return f"expected {wanted}, got {kind_of(error.instance)}"
    if kind == "exclusiveMinimum":
        bound = error.validator_value
        wanted = "a positive number" if bound == 0 else f"a number above {bound}"
        return f"expected {wanted}, got {kind_of(error.instance)}"
    if kind == "maximum" and error.validator_value == _SAFE_INTEGER:
        return f"expected at most 2^53 - 1 (a safe integer), got {kind_of(error.instance)}"
    if kind == "minimum" and error.validator_value == 0 and schema.get("type") == "integer":
        return f"expected a whole number of at least 0, got {kind_of(error.instance)}"
    if kind in ("minimum", "maximum"):
        return f"expected a {kind} of {error.validator_value}, got {kind_of(error.instance)}"
    if kind == "minLength":
        return "must not be empty"
    if kind in ("enum", "const"):
        values = error.validator_value if kind == "enum" else [error.validator_value]
        return f"expected one of {', '.join(map(str, values))}, got {kind_of(error.instance)}"
    if kind == "anyOf":
        consts = [option.get("const") for option in error.validator_value]
        if all(isinstance(value, str) for value in consts):
            return f"expected one of {', '.join(consts)}, got {kind_of(error.instance)}"
        described = [_option(option) for option in error.validator_value]
        if all(described):
            return f"expected {' or '.join(map(str, described))}, got {kind_of(error.instance)}"
    return str(error.message)


def _option(option: Any) -> str | None:
    """One branch of an ``anyOf`` in words (a constant as JSON), or ``None`` when it has
    constraints beyond its type."""
    if not isinstance(option, Mapping):
        return None
    if "const" in option and set(option) <= {"type", "const", "description"}:
        return orjson.dumps(option["const"]).decode()
    name = option.get("type")
    if isinstance(name, str) and set(option) <= {"type", "description"}:
        return _TYPE_NAMES.get(name, name)
    return None


def _required_field(error: Any) -> str | None:
    # jsonschema reports each missing key at its object, naming it only in the message
    # ("'id' is a required property"); name the key itself.
    if error.validator != "required":
        return None
    found = re.match(r"^'(.*)' is a required property$", str(error.message))
    return found.group(1) if found else None


def errors(document: Any, schema_path: Path) -> Iterator[tuple[list[Any], str]]:
    """Each way ``document`` breaks the schema: the path of the value at fault (a missing
    required key's own path) and what was expected, in the schema's order."""
    key = verdict_key(document, schema_path)
    if key is not None and passed_before(key):
        return  # the same document, schema and jsonschema passed before (issue 38)
    failed = False
    for error in validator(schema_path).iter_errors(document):
        failed = True
        path = list(error.absolute_path)
        missing = _required_field(error)
        if missing is not None:
            path.append(missing)
        yield path, expected(error)
    if key is not None and not failed:
        remember_pass(key)
