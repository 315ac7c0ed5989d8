"""Tool-argument conversion and validation (spec §2.3), with pi's error texts.

The expected messages were taken from pi 0.73.1's own ``validateToolArguments`` on the same
schemas and arguments.
"""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.actors.tool_executor.jsvalues import (
    js_length,
    js_number_to_string,
    js_parse_number,
    json_stringify_pretty,
    to_utf8,
)
from pitrio.actors.tool_executor.tools.edit import PARAMETERS as EDIT
from pitrio.actors.tool_executor.tools.read import PARAMETERS as READ
from pitrio.actors.tool_executor.validation import convert, validate_tool_arguments
from pitrio.errors import ToolArgumentsError, ToolError

MIXED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "i": {"type": "integer", "minimum": 1},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "s": {"type": "string", "minLength": 2, "pattern": "^x"},
        "a": {"type": "array", "items": {"type": "number"}, "minItems": 1},
        "o": {"type": "object", "properties": {"x": {"type": "number"}}},
        "e": {"enum": ["a", "b"]},
        "u": {"anyOf": [{"const": "a"}, {"const": "b"}]},
    },
}


def problems(schema: dict[str, Any], args: Any, name: str = "t") -> str:
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(name, schema, args)
    return str(caught.value)


def test_missing_required_reads_like_pi() -> None:
    assert problems(READ, {}, "read") == (
        'Validation failed for tool "read":\n'
        "  - path: must have required properties path\n\n"
        "Received arguments:\n{}"
    )


def test_all_missing_properties_in_one_line() -> None:
    message = problems(EDIT, {}, "edit")
    assert "  - path: must have required properties path, edits\n" in message


CLOSED_EDIT: dict[str, Any] = {
    **EDIT,
    "properties": {
        **EDIT["properties"],
        "edits": {
            **EDIT["properties"]["edits"],
            "items": {**EDIT["properties"]["edits"]["items"], "additionalProperties": False},
        },
    },
}
"""pi 0.73.1's edit schema, whose items were closed (1.6.0's are not)."""


def test_nested_paths_and_additional_properties() -> None:
    args = {"path": "a", "edits": [{"oldText": "x", "newText": "y", "z": 1}]}
    assert problems(CLOSED_EDIT, args, "edit") == (
        'Validation failed for tool "edit":\n'
        "  - edits.0.z: schema is false\n"
        "  - edits.0: must not have additional properties\n\n"
        "Received arguments:\n"
        '{\n  "path": "a",\n  "edits": [\n    {\n      "oldText": "x",\n'
        '      "newText": "y",\n      "z": 1\n    }\n  ]\n}'
    )
    assert "  - edits.0.newText: must have required properties newText" in problems(
        EDIT, {"path": "a", "edits": [{"oldText": "x"}]}
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({"i": 0}, "i: must be >= 1"),
        ({"i": "abc"}, "i: must be integer"),
        ({"b": "yes"}, "b: must be boolean"),
        ({"b": 2}, "b: must be boolean"),
        ({"s": {}}, "s: must be string"),
        ({"s": "y"}, 's: must not have fewer than 2 characters\n  - s: must match pattern "^x"'),
        ({"a": []}, "a: must not have fewer than 1 items"),
        ({"a": ["1", "x"]}, "a.1: must be number"),
        ({"o": "x"}, "o: must be object"),
        ({"n": "Infinity"}, "n: must be number"),
        ({"e": "z"}, "e: must be equal to one of the allowed values"),
        (
            {"u": "c"},
            "u: must be equal to constant\n  - u: must be equal to constant\n"
            "  - u: must match a schema in anyOf",
        ),
    ],
)
def test_messages(args: dict[str, Any], line: str) -> None:
    assert f"\n  - {line}\n\nReceived arguments:" in problems(MIXED, args)


def test_a_non_object_is_reported_at_root() -> None:
    assert "  - root: must be object" in problems(READ, [])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"i": "5.5"}, {"i": 5}),
        ({"i": 2.7}, {"i": 2}),
        ({"i": True}, {"i": 1}),
        ({"i": 3.0}, {"i": 3}),
        ({"n": ""}, {"n": 0}),
        ({"n": " 7 "}, {"n": 7}),
        ({"n": "0x10"}, {"n": 16}),
        ({"n": "1e3"}, {"n": 1000}),
        ({"n": "2.5"}, {"n": 2.5}),
        ({"n": False}, {"n": 0}),
        ({"b": "True"}, {"b": True}),
        ({"b": "0"}, {"b": False}),
        ({"b": 1}, {"b": True}),
        ({"b": None}, {"b": False}),
        ({"s": "x1"}, {"s": "x1"}),
        ({"a": 5}, {"a": [5]}),
        ({"a": ["1", 2]}, {"a": [1, 2]}),
        ({"o": {"x": "3"}}, {"o": {"x": 3}}),
    ],
)
def test_conversions(args: dict[str, Any], expected: dict[str, Any]) -> None:
    assert validate_tool_arguments("t", MIXED, args) == expected


def test_strings_from_scalars_and_input_untouched() -> None:
    args = {"path": 1.5, "offset": "3"}
    assert validate_tool_arguments("read", READ, args) == {"path": "1.5", "offset": 3}
    assert args == {"path": 1.5, "offset": "3"}  # a converted copy, the original is shown
    assert convert({"path": None}, READ) == {"path": "null"}
    assert convert({"path": True}, READ) == {"path": "true"}


def test_it_is_a_tool_error() -> None:
    assert issubclass(ToolArgumentsError, ToolError)


def test_js_values() -> None:
    assert [js_number_to_string(v) for v in (5.0, 0.5, 1e21, 1e-7, 1e-6, 2.0**60)] == [
        "5",
        "0.5",
        "1e+21",
        "1e-7",
        "0.000001",
        "1152921504606847000",
    ]
    assert [js_parse_number(s) for s in ("", " ", "0x10", "1e3", "-0x10", "Infinity", "5.")] == [
        0.0,
        0.0,
        16.0,
        1000.0,
        None,
        None,
        5.0,
    ]
    assert js_length("a😀") == 3
    assert json_stringify_pretty({"a": 1.0, "b": [], "c": "é"}) == (
        '{\n  "a": 1,\n  "b": [],\n  "c": "é"\n}'
    )
    assert to_utf8("a\ud800b") == "a\ufffdb".encode()
