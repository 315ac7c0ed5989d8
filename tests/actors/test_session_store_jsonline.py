"""Which refused line is torn (pitrio/actors/session_store/jsonline.py, ``is_truncated_json``):
the start of an object a crash cut short, as opposed to a malformed line."""

from __future__ import annotations

import orjson
import pytest

from pitrio.actors.session_store.jsonline import is_truncated_json

WHOLE = b'{"type":"message","id":"a","message":{"content":"hello"}}'


def refusal(raw: bytes) -> orjson.JSONDecodeError:
    with pytest.raises(orjson.JSONDecodeError) as caught:
        orjson.loads(raw)
    return caught.value


@pytest.mark.parametrize("cut", [1, 10, 30, len(WHOLE) - 1])
def test_a_prefix_of_an_object_is_torn(cut: int) -> None:
    raw = WHOLE[:cut]
    assert is_truncated_json(raw, refusal(raw))


@pytest.mark.parametrize("cut", [52, 56, 59, 63])
def test_a_prefix_with_text_beyond_ascii_is_torn(cut: int) -> None:
    """The refusal's position counts characters: a cut after "é" and "ö" is still at the end."""
    whole = '{"type":"message","id":"a","message":{"content":"héllo wörld"}}'.encode()
    raw = whole[:cut]
    raw.decode("utf-8")  # each cut falls between characters
    assert is_truncated_json(raw, refusal(raw))


def test_a_write_cut_inside_a_multibyte_character_is_torn() -> None:
    whole = '{"type":"message","id":"a","message":{"content":"héllo"}}'.encode()
    raw = whole[: whole.index("é".encode()) + 1]  # the first byte of two
    assert is_truncated_json(raw, refusal(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage",
        b'["an", "array"',
        b'{"broken": nope}',
        b'{"bad": "\xff", "more": 1}',
        WHOLE + b"}",
    ],
)
def test_other_refused_lines_are_not_torn(raw: bytes) -> None:
    assert not is_truncated_json(raw, refusal(raw))
