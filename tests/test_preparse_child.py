"""The parsing child's line check (pitrio/_preparse_child.py, ``check_line``): the JSON shape
of the session parser's quick path for pi's message line, and nothing else. That its records
read the same as the file read in-process is ``tests/actors/test_session_store_preparsed.py``'s."""

from __future__ import annotations

from typing import Any

import pytest

from pitrio._preparse_child import check_line


def line(**changed: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "type": "message",
        "id": "b",
        "parentId": "a",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    }
    for key, new in changed.items():
        value[key.replace("parent_id", "parentId")] = new
    return value


def test_pis_message_line_is_certified() -> None:
    assert check_line(line()) == ("b", "a", "user")
    assert check_line(line(parent_id=None)) == ("b", None, "user")


@pytest.mark.parametrize(
    "value",
    [
        line(type="label"),
        line(id=""),
        line(id=7),
        line(parent_id=3),
        line(timestamp=1),
        line(message="text"),
        line(message={"content": "no role"}),
        line(message={"role": 1}),
        {**line(), "extra": 1},  # a sixth key
        {key: value for key, value in reversed(line().items())},  # message not last
        {key: value for key, value in line().items() if key != "parentId"},
        ["a", "list"],
        None,
    ],
)
def test_every_other_shape_is_left_to_the_parser(value: Any) -> None:
    assert check_line(value) is None
