"""Event lines: pi 1.6.0's full ``message_update`` form, pitrio's delta form, seed events."""

from __future__ import annotations

from typing import Any

import orjson

from pitrio.actors.model_router import FAUX_MODELS, StreamBuilder, make_usage
from pitrio.messages.codec import to_json
from pitrio.messages.events import (
    AgentEnd,
    AgentSettled,
    MessageUpdate,
    SessionInfoChanged,
)
from pitrio.messages.stream import PartialUpdate
from pitrio.transports.rpc.events import UpdateFormat, delta_update, encode_event

FAUX_1 = next(m for m in FAUX_MODELS if m.id == "faux-1")


def update(event: PartialUpdate) -> MessageUpdate:
    # The agent loop hands over the partial itself as the event's message.
    return MessageUpdate(assistant_message_event=event, message=event.partial)


def stream() -> list[MessageUpdate]:
    builder = StreamBuilder.for_model(FAUX_1)
    builder.start()
    events: list[PartialUpdate] = [
        builder.text_start(),
        builder.text_delta("Hel"),
        builder.text_delta("lo"),
        builder.text_end(),
        builder.toolcall_start("call_1", "read"),
        builder.toolcall_delta('{"path":'),
        builder.toolcall_delta('"a.txt"}'),
        builder.toolcall_end(),
    ]
    return [update(e) for e in events]


def parse(line: bytes) -> Any:
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return orjson.loads(line)


def test_full_form_is_pi_16s_usage_and_event_without_partial() -> None:
    # pi 1.6.0's toJsonEvent (0.73.1 wrote the whole partial twice: in the event and as
    # ``message``): the message's usage so far, then the event without ``partial``, and a
    # toolcall_start with the call's id and toolName
    events = stream()
    lines = [parse(encode_event(e)) for e in events]
    assert all(list(line) == ["type", "usage", "assistantMessageEvent"] for line in lines)
    for event, line in zip(events, lines, strict=True):
        assert line["usage"] == to_json(event.message.usage)  # type: ignore[union-attr]
        assert "partial" not in line["assistantMessageEvent"]
    start = lines[4]["assistantMessageEvent"]
    assert start == {
        "type": "toolcall_start",
        "contentIndex": 1,
        "id": "call_1",
        "toolName": "read",
    }
    assert [line["assistantMessageEvent"] for line in lines[:4]] == [
        {"type": "text_start", "contentIndex": 0},
        {"type": "text_delta", "contentIndex": 0, "delta": "Hel"},
        {"type": "text_delta", "contentIndex": 0, "delta": "lo"},
        {"type": "text_end", "contentIndex": 0, "content": "Hello"},
    ]


def test_full_form_shows_the_usage_at_each_event() -> None:
    builder = StreamBuilder.for_model(FAUX_1)
    builder.start()
    first = update(builder.text_start())
    builder.set_usage(make_usage(input=100, output=10, reasoning=0, model=FAUX_1))
    second = update(builder.text_delta("x"))
    assert parse(encode_event(first))["usage"]["totalTokens"] == 0
    usage = parse(encode_event(second))["usage"]
    assert (usage["input"], usage["output"], usage["reasoning"], usage["totalTokens"]) == (
        100,
        10,
        0,
        110,
    )
    assert list(usage)[3:6] == ["cacheWrite", "reasoning", "totalTokens"]
    assert usage["cost"]["totalFromProvider"] is False


def test_delta_form_carries_only_the_change() -> None:
    lines = [parse(encode_event(e, "delta")) for e in stream()]
    assert [line["assistantMessageEvent"] for line in lines] == [
        {"type": "text_start", "contentIndex": 0},
        {"type": "text_delta", "contentIndex": 0, "delta": "Hel"},
        {"type": "text_delta", "contentIndex": 0, "delta": "lo"},
        {"type": "text_end", "contentIndex": 0, "content": "Hello"},
        {"type": "toolcall_start", "contentIndex": 1, "id": "call_1", "name": "read"},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"path":'},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": '"a.txt"}'},
        {
            "type": "toolcall_end",
            "contentIndex": 1,
            "toolCall": {
                "type": "toolCall",
                "id": "call_1",
                "name": "read",
                "arguments": {"path": "a.txt"},
            },
        },
    ]
    assert all(list(line) == ["type", "assistantMessageEvent"] for line in lines)


def test_delta_form_leaves_other_events_alone() -> None:
    event = SessionInfoChanged(name="x")
    assert (
        encode_event(event, "delta")
        == encode_event(event)
        == b'{"type":"session_info_changed","name":"x"}\n'
    )


def test_a_long_stream_stays_linear_in_delta_form() -> None:
    builder = StreamBuilder.for_model(FAUX_1)
    builder.start()
    builder.text_start()
    sizes = [len(encode_event(update(builder.text_delta("tok ")), "delta")) for _ in range(2000)]
    # Every delta line costs the same whatever came before.
    assert max(sizes) == min(sizes) < 120
    full = [len(encode_event(update(builder.text_delta("tok ")))) for _ in range(2000)]
    assert max(full) == min(full)  # pi 1.6.0's form is linear too (0.73.1's was quadratic)


def test_lone_surrogates_are_escaped_as_javascript_does() -> None:
    builder = StreamBuilder.for_model(FAUX_1)
    builder.start()
    builder.text_start()
    event = update(builder.text_delta("a\ud83d"))
    forms: tuple[UpdateFormat, ...] = ("full", "delta")
    for form in forms:
        line = encode_event(event, form)
        assert b"\\ud83d" in line
        assert orjson.loads(line.replace(b"\\ud83d", b"?"))["type"] == "message_update"
    assert delta_update(event)["assistantMessageEvent"]["delta"] == "a\ud83d"


def test_seed_events_and_fields_are_written() -> None:
    # pi 1.6.0's shape: whether an abort was asked for during the run
    assert parse(encode_event(AgentSettled())) == {"type": "agent_settled", "aborted": False}
    assert parse(encode_event(AgentSettled(aborted=True)))["aborted"] is True
    assert parse(encode_event(AgentEnd(messages=(), will_retry=True))) == {
        "type": "agent_end",
        "messages": [],
        "willRetry": True,
    }
