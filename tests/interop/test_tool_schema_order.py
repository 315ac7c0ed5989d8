"""The built-in tools' parameter schemas have pi 0.73.1's key order.

pi builds them with TypeBox, whose objects come out as ``type``, ``required``, ``properties``
and then the options (``additionalProperties``); the order is visible in every request body
(the differential harness compares those bodies key by key).
"""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.actors.tool_executor.tools import bash, edit, find, grep, ls, read, write


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


@pytest.mark.parametrize(
    "module", [read, bash, write, edit, grep, find, ls], ids=lambda m: m.__name__.rsplit(".", 1)[-1]
)
def test_object_keys_in_typebox_order(module: Any) -> None:
    for obj in _objects(module.PARAMETERS):
        keys = [k for k in obj if k in ("type", "required", "properties")]
        want = ["type", "required", "properties"] if "required" in obj else ["type", "properties"]
        assert keys == want, obj
        assert list(obj)[: len(want)] == want, list(obj)
