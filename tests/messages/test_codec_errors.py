"""A value that does not decode raises DecodeError naming the type and the JSON path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pitrio.errors import DecodeError, PitrioError
from pitrio.messages.agent import AgentMessage, AssistantMessage, UserMessage
from pitrio.messages.codec import decode, from_json
from pitrio.messages.content import TextContent
from pitrio.messages.entries import FileLine, MessageEntry, SessionHeader
from pitrio.messages.events import AgentSessionEvent, QueueUpdate
from pitrio.messages.model import Model

USAGE: dict[str, Any] = {
    "input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}  # fmt: skip
ASSISTANT: dict[str, Any] = {
    "role": "assistant", "content": [{"type": "text", "text": "hi"}], "api": "faux-api",
    "provider": "faux", "model": "faux-1", "usage": USAGE, "stopReason": "stop", "timestamp": 1,
}  # fmt: skip


def entry(message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": "a1b2c3d4", "parentId": None,
            "timestamp": "2026-01-01T00:00:00.000Z", "message": message}  # fmt: skip


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


def without(base: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k != key}


def decode_error(value: Any, cls: Any) -> str:
    """Decode ``value`` both as plain JSON and as bytes; both must fail the same way."""
    with pytest.raises(DecodeError) as from_value:
        from_json(value, cls)
    with pytest.raises(DecodeError) as from_bytes:
        decode(orjson.dumps(value), cls)
    assert str(from_value.value) == str(from_bytes.value)
    assert "\n" not in str(from_value.value)
    return str(from_value.value)


def test_the_valid_bases_decode() -> None:
    # the failures below are caused by the one change each makes, not by the base
    decoded = from_json(entry(ASSISTANT), FileLine)
    assert isinstance(decoded, MessageEntry)
    assert isinstance(decoded.message, AssistantMessage)


@pytest.mark.parametrize(
    ("value", "type_name", "path", "what"),
    [
        pytest.param(
            entry(with_(ASSISTANT, content=[{"type": "text", "text": 5}])),
            "MessageEntry",
            "$.message.content[0].text",
            "expected a string",
            id="number-for-string-in-a-content-block",
        ),
        pytest.param(
            entry(with_(ASSISTANT, usage=with_(USAGE, cost=with_(USAGE["cost"], total="0")))),
            "MessageEntry",
            "$.message.usage.cost.total",
            "expected a number",
            id="string-for-number-deep-in-usage",
        ),
        pytest.param(
            entry(with_(ASSISTANT, timestamp=True)),
            "MessageEntry",
            "$.message.timestamp",
            "expected an integer",
            id="boolean-for-integer",
        ),
        pytest.param(
            entry(with_(ASSISTANT, timestamp=1.5)),
            "MessageEntry",
            "$.message.timestamp",
            "expected an integer",
            id="fraction-for-integer",
        ),
        pytest.param(
            entry(with_(ASSISTANT, stopReason="finished")),
            "MessageEntry",
            "$.message.stopReason",
            "finished",
            id="value-outside-a-literal",
        ),
        pytest.param(
            entry(with_(ASSISTANT, content={"type": "text", "text": "hi"})),
            "MessageEntry",
            "$.message.content",
            "expected an array",
            id="object-for-array",
        ),
        pytest.param(
            entry(with_(ASSISTANT, content=[{"type": "image", "data": "x", "mimeType": 3}])),
            "MessageEntry",
            "$.message.content[0]",
            "image",
            id="block-not-allowed-for-the-role",
        ),
        pytest.param(
            with_(entry(ASSISTANT), parentId=7),
            "MessageEntry",
            "$.parentId",
            "number",
            id="number-for-nullable-string",
        ),
        pytest.param(
            {"type": "session", "version": "3", "id": "s", "timestamp": "t", "cwd": "/"},
            "SessionHeader",
            "$.version",
            "string",
            id="string-version-in-header",
        ),
    ],
)
def test_wrong_type_of_a_nested_field(value: Any, type_name: str, path: str, what: str) -> None:
    message = decode_error(value, FileLine)
    assert message.startswith(type_name + ":")
    assert path in message
    assert what in message


@pytest.mark.parametrize(
    ("value", "cls", "type_name", "path"),
    [
        (without(ASSISTANT, "stopReason"), AgentMessage, "AssistantMessage", "$.stopReason"),
        (entry(without(ASSISTANT, "usage")), FileLine, "MessageEntry", "$.message.usage"),
        (without(entry(ASSISTANT), "parentId"), FileLine, "MessageEntry", "$.parentId"),
        (
            {
                "type": "tool_execution_end",
                "toolCallId": "c",
                "toolName": "read",
                "result": {"details": {}},
                "isError": False,
            },
            AgentSessionEvent,
            "ToolExecutionEnd",
            "$.result.content",
        ),
        (
            {
                "type": "compaction",
                "id": "a",
                "parentId": "b",
                "timestamp": "t",
                "summary": "s",
                "tokensBefore": 1,
            },
            FileLine,
            "CompactionEntry",
            "$.firstKeptEntryId",
        ),
        (
            {"type": "session", "id": "s", "timestamp": "t"},
            FileLine,
            "SessionHeader",
            "$.cwd",
        ),
    ],
)
def test_missing_required_field(value: Any, cls: Any, type_name: str, path: str) -> None:
    message = decode_error(value, cls)
    assert message.startswith(type_name + ":")
    assert f"required field missing @ {path}" in message


def test_every_missing_field_is_named() -> None:
    message = decode_error({"role": "user"}, UserMessage)
    assert message.startswith("UserMessage:")
    assert "$.content" in message
    assert "$.timestamp" in message


@pytest.mark.parametrize(
    ("value", "cls", "names"),
    [
        ({"type": "bogus_entry", "id": "a"}, FileLine, ["type", "bogus_entry"]),
        ({"type": "agent_begin"}, AgentSessionEvent, ["type", "agent_begin"]),
        (
            entry(with_(ASSISTANT, content=[{"type": "video"}])),
            FileLine,
            ["MessageEntry", "type", "video", "$.message.content[0]"],
        ),
        (
            {"type": "image", "data": "x", "mimeType": "image/png"},
            TextContent,
            ["TextContent", "type", "image"],
        ),
        ({"id": "x"}, FileLine, ["type", "None"]),
    ],
)
def test_unknown_tag_value(value: Any, cls: Any, names: list[str]) -> None:
    # (an unknown message role is no error: it is kept, see test_codec's unknown roles)
    message = decode_error(value, cls)
    for name in names:
        assert name in message


@pytest.mark.parametrize(
    ("data", "cls", "type_name", "what"),
    [
        (b"42", FileLine, "SessionHeader | MessageEntry", "number"),
        (b"[]", FileLine, "SessionHeader | MessageEntry", "array"),
        (b'"session"', FileLine, "SessionHeader | MessageEntry", "string"),
        (b"null", AgentSessionEvent, "AgentStart | AgentEnd", "null"),
        (b"[1]", UserMessage, "UserMessage", "expected a JSON object, got array"),
        (
            b'{"type":"queue_update","steering":"abc","followUp":[]}',
            QueueUpdate,
            "QueueUpdate",
            "$.steering",
        ),
        (
            b'{"type":"queue_update","steering":[1],"followUp":[]}',
            AgentSessionEvent,
            "QueueUpdate",
            "$.steering[0]",
        ),
    ],
)
def test_non_object_json(data: bytes, cls: Any, type_name: str, what: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(data, cls)
    message = str(caught.value)
    assert message.startswith(type_name)
    assert what in message


@pytest.mark.parametrize(
    "data",
    [
        b'{"type":"message","id":"a1b2c3d4","parentId":null,"timesta',  # a torn line
        b"",
        b"   ",
        b"{'type': 'session'}",
        b'{"type":"session"}}',
        b"\xff\xfe{}",
        b'{"type":"session","id":"s","timestamp":"t","cwd":"/",}',
    ],
)
def test_malformed_json_bytes(data: bytes) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(data, FileLine)
    message = str(caught.value)
    assert "malformed JSON" in message
    assert "SessionHeader" in message


def test_decode_error_is_a_value_error_and_not_retryable() -> None:
    with pytest.raises(DecodeError) as caught:
        decode(b"{", SessionHeader)
    assert isinstance(caught.value, PitrioError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.retryable is False


def test_no_silent_coercion_of_scalars() -> None:
    # cattrs' defaults would turn 5 into "5", true into 1 and "abc" into ("a", "b", "c")
    decode_error({"type": "text", "text": 5}, TextContent)
    decode_error({"type": "text", "text": None}, TextContent)
    decode_error({"role": "user", "content": "x", "timestamp": "12"}, UserMessage)
    decode_error({"type": "queue_update", "steering": "abc", "followUp": []}, QueueUpdate)
    decode_error(
        {
            "id": "m",
            "name": "n",
            "api": "a",
            "provider": "p",
            "baseUrl": "u",
            "reasoning": 1,
            "input": ["text"],
            "cost": {},
            "contextWindow": 1,
            "maxTokens": 1,
        },
        Model,
    )
    # a whole float is a JavaScript integer
    assert from_json({"role": "user", "content": "x", "timestamp": 7.0}, UserMessage).timestamp == 7
