"""The built-in tools' parameter schemas have pi 1.6.0's shape and key order.

pi builds them with TypeBox, whose objects come out as ``type``, ``required``, ``properties``
(an array as ``type``, ``items``, then its options such as ``description``); the order is
visible in every request body (the differential harness compares those bodies key by key).
1.6.0's schemas close no object (no ``additionalProperties``; 0.73.1's ``edit`` closed both
levels) and the four file tools ask for strict sampling ``"prefer"``, so a provider that takes
strict tools declares them in their strict form (``providers/strict_tools.py``).

``PI_160`` is pi 1.6.0's ``dist/core/tools/*.js`` schemas with every description replaced by
``<text>`` (pitrio's descriptions are its own words).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pitrio.actors.tool_executor.tools import (
    bash,
    create_builtin_tools,
    edit,
    find,
    grep,
    ls,
    read,
    write,
)

PI_160: dict[str, Any] = {
    "read": {
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "description": "<text>"},
            "offset": {"type": "number", "description": "<text>"},
            "limit": {"type": "number", "description": "<text>"},
        },
    },
    "bash": {
        "type": "object",
        "required": ["command"],
        "properties": {
            "command": {"type": "string", "description": "<text>"},
            "timeout": {"type": "number", "description": "<text>"},
        },
    },
    "edit": {
        "type": "object",
        "required": ["path", "edits"],
        "properties": {
            "path": {"type": "string", "description": "<text>"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["oldText", "newText"],
                    "properties": {
                        "oldText": {"type": "string", "description": "<text>"},
                        "newText": {"type": "string", "description": "<text>"},
                    },
                },
                "description": "<text>",
            },
        },
    },
    "write": {
        "type": "object",
        "required": ["path", "content"],
        "properties": {
            "path": {"type": "string", "description": "<text>"},
            "content": {"type": "string", "description": "<text>"},
        },
    },
    "grep": {
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "<text>"},
            "path": {"type": "string", "description": "<text>"},
            "glob": {"type": "string", "description": "<text>"},
            "ignoreCase": {"type": "boolean", "description": "<text>"},
            "literal": {"type": "boolean", "description": "<text>"},
            "context": {"type": "number", "description": "<text>"},
            "limit": {"type": "number", "description": "<text>"},
        },
    },
    "find": {
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "<text>"},
            "path": {"type": "string", "description": "<text>"},
            "limit": {"type": "number", "description": "<text>"},
        },
    },
    "ls": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "<text>"},
            "limit": {"type": "number", "description": "<text>"},
        },
    },
}

PI_160_STRICT = {
    "read": "prefer",
    "bash": "prefer",
    "edit": "prefer",
    "write": "prefer",
    "grep": None,
    "find": None,
    "ls": None,
}

MODULES = {
    "read": read,
    "bash": bash,
    "edit": edit,
    "write": write,
    "grep": grep,
    "find": find,
    "ls": ls,
}


def _shape(schema: Any) -> Any:
    """``schema`` with its descriptions blanked, key order kept."""
    if isinstance(schema, dict):
        return {k: "<text>" if k == "description" else _shape(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_shape(v) for v in schema]
    return schema


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``, itself first."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


@pytest.mark.parametrize("name", list(MODULES))
def test_schema_is_pi_160s_with_its_key_order(name: str) -> None:
    ours = _shape(MODULES[name].PARAMETERS)
    # json.dumps keeps insertion order, so this compares the key order at every level too.
    assert json.dumps(ours) == json.dumps(PI_160[name])


@pytest.mark.parametrize("name", list(MODULES))
def test_object_keys_in_typebox_order(name: str) -> None:
    for obj in _objects(MODULES[name].PARAMETERS):
        keys = [k for k in obj if k in ("type", "required", "properties")]
        want = ["type", "required", "properties"] if "required" in obj else ["type", "properties"]
        assert keys == want, obj
        assert list(obj)[: len(want)] == want, list(obj)
        assert "additionalProperties" not in obj  # 1.6.0 closes no object


def test_the_file_tools_prefer_strict_sampling() -> None:
    tools = {tool.name: tool.spec.constrained_sampling for tool in create_builtin_tools("/tmp")}
    assert tools == PI_160_STRICT
