"""Tool-argument coercion and validation (spec §2.3), with pi 1.6.0's error texts.

The expected messages are pi 1.6.0's own ``validateToolArguments`` (pi-schema) on the same
schemas and arguments, recorded in ``expected/pi160_tool_validation.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pitrio.actors.tool_executor.jsvalues import (
    js_length,
    js_number_to_string,
    js_parse_number,
    json_stringify,
    json_stringify_pretty,
    to_utf8,
)
from pitrio.actors.tool_executor.tools import bash, edit, find, grep, ls, read, write
from pitrio.actors.tool_executor.tools.edit import PARAMETERS as EDIT
from pitrio.actors.tool_executor.tools.read import PARAMETERS as READ
from pitrio.actors.tool_executor.validation import coerce, convert, validate_tool_arguments
from pitrio.errors import ToolArgumentsError, ToolError

RECORDED = json.loads(
    (Path(__file__).parent / "expected" / "pi160_tool_validation.json").read_text()
)
SCHEMAS: dict[str, Any] = {
    "read": read.PARAMETERS,
    "bash": bash.PARAMETERS,
    "edit": edit.PARAMETERS,
    "write": write.PARAMETERS,
    "grep": grep.PARAMETERS,
    "find": find.PARAMETERS,
    "ls": ls.PARAMETERS,
    "mixed": RECORDED["mixed"],
}
MIXED: dict[str, Any] = RECORDED["mixed"]


def problems(schema: dict[str, Any], args: Any, name: str = "t") -> str:
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(name, schema, args)
    return str(caught.value)


def _outcome(tool: str, args: Any) -> dict[str, Any]:
    try:
        return {"ok": validate_tool_arguments(tool, SCHEMAS[tool], args)}
    except ToolArgumentsError as exc:
        return {"err": str(exc)}


@pytest.mark.parametrize(
    "case", RECORDED["cases"], ids=lambda c: f"{c['tool']}-{json_stringify(c['arguments'])}"
)
def test_same_outcome_as_pi(case: dict[str, Any]) -> None:
    # Coerced arguments and failure texts alike, JSON-compared as pi prints them.
    ours = _outcome(case["tool"], case["arguments"])
    assert json_stringify(ours) == json_stringify(case["pi"])


def test_missing_required_reads_like_pi() -> None:
    assert problems(READ, {}, "read") == (
        'Validation failed for tool "read":\n  - path: missing\n\nReceived arguments:\n{}'
    )


def test_each_missing_property_on_its_own_line() -> None:
    message = problems(EDIT, {}, "edit")
    assert "  - path: missing\n  - edits: missing\n" in message


def test_nested_paths_and_unknown_fields() -> None:
    closed = {**MIXED["properties"]["o"]}
    args = {"o": {"x": 1, "z": 2}}
    assert problems({"type": "object", "properties": {"o": closed}}, args) == (
        'Validation failed for tool "t":\n'
        "  - o.z: unknown field\n\n"
        "Received arguments:\n"
        '{\n  "o": {\n    "x": 1,\n    "z": 2\n  }\n}'
    )
    assert "  - edits.0.newText: missing" in problems(
        EDIT, {"path": "a", "edits": [{"oldText": "x"}]}
    )
    # 1.6.0's edit items are open: an extra field passes.
    args = {"path": "a", "edits": [{"oldText": "x", "newText": "y", "z": 1}]}
    assert validate_tool_arguments("edit", EDIT, args) == args


def test_a_non_object_is_reported_at_root() -> None:
    assert "  - root: expected object, got array" in problems(READ, [])


def test_optional_nulls_are_dropped_as_if_omitted() -> None:
    # What a strict declaration makes the model send for an absent optional argument.
    args = {"path": "a.txt", "offset": None, "limit": None}
    assert validate_tool_arguments("read", READ, args) == {"path": "a.txt"}
    assert args == {"path": "a.txt", "offset": None, "limit": None}
    # A required property set to null is converted (to "null" for a string), not dropped.
    assert validate_tool_arguments("read", READ, {"path": None}) == {"path": "null"}
    # A null the schema takes stays.
    nullable = {"type": "object", "properties": {"t": {"type": ["integer", "null"]}}}
    assert validate_tool_arguments("t", nullable, {"t": None}) == {"t": None}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"i": "5.5"}, {"i": 5}),
        ({"i": 2.7}, {"i": 2}),
        ({"i": True}, {"i": 1}),
        ({"i": 3.0}, {"i": 3}),
        ({"i": 1, "n": ""}, {"i": 1, "n": 0}),
        ({"i": 1, "n": " 7 "}, {"i": 1, "n": 7}),
        ({"i": 1, "n": "0x10"}, {"i": 1, "n": 16}),
        ({"i": 1, "n": "1e3"}, {"i": 1, "n": 1000}),
        ({"i": 1, "n": "2.5"}, {"i": 1, "n": 2.5}),
        ({"i": 1, "n": False}, {"i": 1, "n": 0}),
        ({"i": 1, "n": "true"}, {"i": 1, "n": 1}),
        ({"i": 1, "b": "True"}, {"i": 1, "b": True}),
        ({"i": 1, "b": "0"}, {"i": 1, "b": False}),
        ({"i": 1, "b": 1}, {"i": 1, "b": True}),
        ({"i": 1, "b": None}, {"i": 1}),
        ({"i": 1, "s": "x1"}, {"i": 1, "s": "x1"}),
        ({"i": 1, "a": 5}, {"i": 1, "a": [5]}),
        ({"i": 1, "a": ["1", 2]}, {"i": 1, "a": [1, 2]}),
        ({"i": 1, "o": {"x": "3"}}, {"i": 1, "o": {"x": 3}}),
        ({"i": 1, "e": "3"}, {"i": 1, "e": 3}),
        ({"i": 1, "k": "5"}, {"i": 1, "k": 5}),
        ({"i": 1, "t": "5"}, {"i": 1, "t": 5}),
        ({"i": 1, "t": ""}, {"i": 1, "t": None}),
    ],
)
def test_conversions(args: dict[str, Any], expected: dict[str, Any]) -> None:
    assert validate_tool_arguments("t", MIXED, args) == expected


def test_strings_from_scalars_and_input_untouched() -> None:
    args = {"path": 1.5, "offset": "3"}
    assert validate_tool_arguments("read", READ, args) == {"path": "1.5", "offset": 3}
    assert args == {"path": 1.5, "offset": "3"}  # a converted copy, the original is shown
    assert coerce({"path": True}, READ) == {"path": "true"}
    assert convert is coerce


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
    assert json_stringify({"a": 1.0, "b": [1, "x"]}) == '{"a":1,"b":[1,"x"]}'
    assert json_stringify_pretty({"a": 1.0, "b": [], "c": "é"}) == (
        '{\n  "a": 1,\n  "b": [],\n  "c": "é"\n}'
    )
    assert to_utf8("a\ud800b") == "a\ufffdb".encode()
