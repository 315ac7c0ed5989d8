"""pi 1.6.0's published ``models.json`` schema: checking a document against it and naming each
problem in pitrio's words (the file, the entry, the field and what was expected). Pure.

The schema (``models.schema.json`` beside this module) is copied from pi by
``scripts/gen_catalogue.py``; :mod:`pitrio.actors.json_schema` checks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pitrio.actors.json_schema import errors, json_path
from pitrio.errors import ModelsJsonError

__all__ = ["SCHEMA_PATH", "schema_problems"]

SCHEMA_PATH = Path(__file__).with_name("models.schema.json")


def _where(path: Iterable[Any]) -> tuple[str, str]:
    """``(entry, field)`` of a JSON path: the entry is the innermost provider, model or
    ``modelOverrides`` entry (``providers.x.models[0]``), the field the rest (``cost.input``)."""
    parts = list(path)
    cut = 0
    for index in range(len(parts)):
        before = parts[index - 1] if index else None
        if (index == 1 and parts[0] == "providers") or before in ("models", "modelOverrides"):
            cut = index + 1
    return json_path(parts[:cut]), json_path(parts[cut:])


def schema_problems(document: Any, file: str) -> list[ModelsJsonError]:
    """Each way ``document`` breaks pi 1.6.0's ``models.json`` schema, naming the entry, the
    field and what was expected, in document order."""
    problems = []
    for path, wanted in errors(document, SCHEMA_PATH):
        entry, field = _where(path)
        problems.append(ModelsJsonError(file, entry, field, wanted))
    return problems  # jsonschema walks the schema in its order, which is pi's
