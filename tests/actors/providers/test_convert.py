"""Transcript preparation shared by the HTTP providers (pure)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from pitrio.actors.model_router.providers.convert import (
    IMAGE_OMITTED_TEXT,
    NO_RESULT_TEXT,
    prepare_messages,
    short_hash,
)
from pitrio.messages import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.actors.providers.support import assistant, make_model, tool_result

MODEL = make_model("openai-completions")
IMAGE = ImageContent(data="AAAA", mime_type="image/png")


def test_own_messages_keep_signatures_foreign_ones_become_text() -> None:
    own = assistant(
        ThinkingContent(thinking="t", thinking_signature="s"),
        TextContent(text="x", text_signature="ts"),
    )
    foreign = assistant(
        ThinkingContent(thinking="t2", thinking_signature="s2"),
        ThinkingContent(thinking="[redacted]", thinking_signature="d", redacted=True),
        TextContent(text="y", text_signature="ts2"),
        ToolCall(id="c", name="n", arguments={}, thought_signature="g"),
        model="other",
        stop_reason="toolUse",
    )
    out = prepare_messages([own, foreign, tool_result("c", "r")], MODEL)
    assert out[0] == own
    assert out[1].content == (
        TextContent(text="t2"),
        TextContent(text="y"),
        ToolCall(id="c", name="n", arguments={}),
    )


def test_pairing_of_tool_calls_and_results() -> None:
    calls = (ToolCall(id="a", name="n", arguments={}), ToolCall(id="b", name="n", arguments={}))
    out = prepare_messages(
        [
            assistant(*calls, stop_reason="toolUse"),
            tool_result("b", "B"),
            tool_result("b", "again"),  # answered already: dropped
            tool_result("zzz", "orphan"),  # no such call: dropped
        ],
        MODEL,
    )
    results = [m for m in out if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [("b", False), ("a", True)]
    assert results[1].content == (TextContent(text=NO_RESULT_TEXT),)


def test_failed_responses_and_their_calls_are_left_out() -> None:
    out = prepare_messages(
        [
            assistant(ToolCall(id="a", name="n", arguments={}), stop_reason="aborted"),
            tool_result("a", "late"),
            assistant(TextContent(text="oops"), stop_reason="error"),
        ],
        MODEL,
    )
    assert out == []


def test_images_for_text_only_models_and_id_normalisation() -> None:
    text_only = make_model("openai-completions", image=False)
    user = UserMessage(content=(TextContent(text="see"), IMAGE, IMAGE), timestamp=1)
    out = prepare_messages([user], text_only, lambda value: value.upper())
    assert out[0].content == (
        TextContent(text="see"),
        TextContent(text=IMAGE_OMITTED_TEXT),
    )
    # pi's wire texts: one for a user's images, another for a tool result's.
    assert IMAGE_OMITTED_TEXT == "(image omitted: model does not support images)"
    call = ToolCall(id="t", name="read", arguments={})
    result = ToolResultMessage(
        tool_call_id="t", tool_name="read", content=(IMAGE,), is_error=False, timestamp=3
    )
    out = prepare_messages([assistant(call, stop_reason="toolUse"), result], text_only)
    assert out[1].content == (
        TextContent(text="(tool image omitted: model does not support images)"),
    )
    out = prepare_messages(
        [assistant(ToolCall(id="x", name="n", arguments={}), stop_reason="toolUse"),
         tool_result("x", "r")],
        MODEL,
        lambda value: value.upper(),
    )  # fmt: skip
    assert out[0].content[0].id == "X"  # type: ignore[union-attr]
    assert out[1].tool_call_id == "X"  # type: ignore[union-attr]


def test_short_hash_is_stable_and_alphanumeric() -> None:
    value = short_hash("toolu_01ABC", 9)
    assert value == short_hash("toolu_01ABC", 9)
    assert len(value) == 9 and value.isalnum()
    assert value != short_hash("toolu_01ABD", 9)


@pytest.mark.parametrize("piece", [16 * 1024, 1])
@pytest.mark.parametrize("segment", [1, 40, 1 << 20])
def test_encoded_items_make_the_bytes_of_the_plain_values(
    segment: int, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Segments of any size (one item each, a few items, all in the open one) encode exactly as
    # the values themselves; a copy grows on its own. With ``piece`` 1 the open segment is a
    # piece of its own too.
    from pitrio.actors.model_router.providers import convert

    monkeypatch.setattr(convert, "SEGMENT_BYTES", segment)
    monkeypatch.setattr(convert, "PIECE_BYTES", piece)
    values = [{"role": "user", "content": f"message {n}", "n": n} for n in range(25)]
    encoded = convert.EncodedItems(encoded=True)
    plain = convert.EncodedItems(encoded=False)

    def encode(value: Any) -> bytes:
        return convert.body_bytes(convert.encode_json_pieces(value))

    assert encode(encoded.items()) == b"[]"
    for value in values:
        encoded.append(value)
        plain.append(value)
    assert len(encoded) == len(plain) == 25
    assert encode(encoded.items()) == orjson.dumps(values) == orjson.dumps(plain.items())
    assert encode(["head", *encoded.items(), "tail"]) == orjson.dumps(["head", *values, "tail"])
    twin = encoded.copy()
    twin.append({"extra": True})
    assert encode(twin.items()) == orjson.dumps([*values, {"extra": True}])
    assert encode(encoded.items()) == orjson.dumps(values)
    # In pieces: the same bytes, each frozen segment a piece as it is kept (not copied).
    items = encoded.items()
    body = {"messages": ["sys \x00 nul", *items], "stream": True}
    pieces = convert.encode_json_pieces(body)
    expected = orjson.dumps({"messages": ["sys \x00 nul", *values], "stream": True})
    segments = [item.data for item in items if isinstance(item, convert.FrozenSegment)]
    if segments:
        assert isinstance(pieces, tuple)
        assert b"".join(pieces) == expected
        kept = [piece for piece in pieces if any(piece is data for data in segments)]
        assert len(kept) == len(segments)
    else:
        assert pieces == expected
    assert convert.body_bytes(pieces) == expected


def test_only_frozen_segments_are_encoded_beyond_json() -> None:
    from pitrio.actors.model_router.providers import convert

    with pytest.raises(TypeError, match="object"):
        convert.encode_json_pieces({"a": object()})


def test_a_lone_surrogate_reaches_the_request_body_escaped() -> None:
    """A broken pair (``"\\ud83d"``, which pi's sessions and clients may carry) is sent as
    ``JSON.stringify`` writes it, in plain values and in encoded transcript segments alike;
    orjson alone refuses such a string (issue 21)."""
    from pitrio.actors.model_router.providers import convert

    items = convert.EncodedItems(encoded=True)
    items.append({"role": "user", "content": "half \ud83d an emoji"})
    items.append({"role": "user", "content": "x" * (convert.SEGMENT_BYTES + 1)})  # a segment
    items.append({"role": "user", "content": "tail \udc00"})
    value = {"messages": items.items(), "note": "\ud800"}
    body = convert.body_bytes(convert.encode_json_pieces(value))
    assert b'"half \\ud83d an emoji"' in body
    assert b'"tail \\udc00"' in body
    assert body.endswith(b'"note":"\\ud800"}')
    decoded = json.loads(body)
    assert decoded["messages"][0]["content"] == "half \ud83d an emoji"
    assert len(decoded["messages"]) == 3
