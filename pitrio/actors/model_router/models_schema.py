"""pi 1.6.0's published ``models.json`` schema: checking a document against it and naming each
problem in pitrio's words (the file, the entry, the field and what was expected). Pure.

The schema (``models.schema.json`` beside this module) is copied from pi by
``scripts/gen_catalogue.py``; ``jsonschema`` (Draft 2020-12) checks it, imported with the first
``models.json`` (most runs have none).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from pitrio.errors import ModelsJsonError

SCHEMA_PATH = Path(__file__).with_name("models.schema.json")


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
def _validator() -> Any:
    import jsonschema  # type: ignore[import-untyped]  # with the first models.json only

    schema = orjson.loads(SCHEMA_PATH.read_bytes())
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


def _where(path: Iterable[Any]) -> tuple[str, str]:
    """``(entry, field)`` of a JSON path: the entry is the innermost provider, model or
    ``modelOverrides`` entry (``providers.x.models[0]``), the field the rest (``cost.input``)."""
    parts = list(path)
    cut = 0
    for index in range(len(parts)):
        before = parts[index - 1] if index else None
        if (index == 1 and parts[0] == "providers") or before in ("models", "modelOverrides"):
            cut = index + 1
    return _json_path(parts[:cut]), _json_path(parts[cut:])


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _expected(error: Any) -> str:
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
        else:
            wanted = " or ".join(_TYPE_NAMES.get(str(name), str(name)) for name in names)
        return f"expected {wanted}, got {kind_of(error.instance)}"
    if kind == "exclusiveMinimum":
        bound = error.validator_value
        wanted = "a positive number" if bound == 0 else f"a number above {bound}"
        return f"expected {wanted}, got {kind_of(error.instance)}"
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
        types = [option.get("type") for option in error.validator_value]
        if all(isinstance(name, str) and len(option) == 1
               for name, option in zip(types, error.validator_value, strict=True)):  # fmt: skip
            wanted = " or ".join(_TYPE_NAMES.get(str(name), str(name)) for name in types)
            return f"expected {wanted}, got {kind_of(error.instance)}"
    return str(error.message)


def _required_field(error: Any) -> str | None:
    # jsonschema reports each missing key at its object, naming it only in the message
    # ("'id' is a required property"); name the key itself.
    if error.validator != "required":
        return None
    found = re.match(r"^'(.*)' is a required property$", str(error.message))
    return found.group(1) if found else None


def schema_problems(document: Any, file: str) -> list[ModelsJsonError]:
    """Each way ``document`` breaks pi 1.6.0's ``models.json`` schema, naming the entry, the
    field and what was expected, in document order."""
    problems = []
    for error in _validator().iter_errors(document):
        path = list(error.absolute_path)
        missing = _required_field(error)
        if missing is not None:
            path.append(missing)
        entry, field = _where(path)
        problems.append(ModelsJsonError(file, entry, field, _expected(error)))
    return problems  # jsonschema walks the schema in its order, which is pi's
