"""The stream builder: event sequences and partial snapshots of spec §1.7 (pure, no trio)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pitrio.actors.model_router.registry import FAUX_MODELS
from pitrio.actors.model_router.stream_builder import (
    ABORTED_MESSAGE,
    StreamBuilder,
    StreamStateError,
    aborted_message,
    failure_message,
    parse_arguments,
)
from pitrio.messages import TextContent, ThinkingContent, ToolCall, Usage, to_json
from pitrio.messages.stream import StreamDone, StreamError


def builder(**kwargs: Any) -> StreamBuilder:
    return StreamBuilder(api="faux-api", provider="faux", model="faux-1", timestamp=7, **kwargs)


def test_text_sequence_and_partials() -> None:
    b = builder()
    start = b.start()
    assert start.type == "start"
    assert start.partial.content == ()
    assert start.partial.stop_reason == "pending"  # pi 1.6.0 (0.73.1's partials said "stop")
    assert (start.partial.api, start.partial.provider, start.partial.model) == (
        "faux-api",
        "faux",
        "faux-1",
    )

    ts = b.text_start()
    assert (ts.type, ts.content_index) == ("text_start", 0)
    assert ts.partial.content == (TextContent(text=""),)

    d1 = b.text_delta("Hello, ")
    d2 = b.text_delta("world")
    assert (d1.delta, d1.content_index) == ("Hello, ", 0)
    assert d1.partial.content == (TextContent(text="Hello, "),)
    assert d2.partial.content == (TextContent(text="Hello, world"),)
    # Earlier snapshots are immutable: later deltas do not change them.
    assert d1.partial.content == (TextContent(text="Hello, "),)

    end = b.text_end()
    assert (end.type, end.content, end.content_index) == ("text_end", "Hello, world", 0)
    assert {d1.partial.stop_reason, end.partial.stop_reason} == {"pending"}

    done = b.done()
    assert isinstance(done, StreamDone)
    assert done.reason == "stop"
    assert done.message.content == (TextContent(text="Hello, world"),)
    assert done.message.stop_reason == "stop"
    assert done.message.timestamp == 7
    assert b.result == done.message
    assert b.finished


def test_thinking_then_text() -> None:
    b = builder()
    b.start()
    assert b.thinking_start().content_index == 0
    b.thinking_delta("Let me ")
    delta = b.thinking_delta("think.")
    assert delta.type == "thinking_delta"
    assert delta.partial.content == (ThinkingContent(thinking="Let me think."),)
    end = b.thinking_end(signature="sig-1")
    assert end.content == "Let me think."
    assert end.partial.content == (
        ThinkingContent(thinking="Let me think.", thinking_signature="sig-1"),
    )

    ts = b.text_start()
    assert ts.content_index == 1
    assert ts.partial.content[1] == TextContent(text="")
    b.text_delta("Answer.")
    b.text_end(signature="t-sig")
    final = b.done().message
    assert final.content == (
        ThinkingContent(thinking="Let me think.", thinking_signature="sig-1"),
        TextContent(text="Answer.", text_signature="t-sig"),
    )


def test_tool_call_arguments_during_and_after_streaming() -> None:
    """Partials show ``{}`` until the accumulated JSON is a complete object (as pi does)."""
    b = builder()
    b.start()
    b.text_start()
    b.text_delta("Step 1/2: read.")
    b.text_end()
    start = b.toolcall_start("call_1", "read")
    assert start.content_index == 1
    assert start.partial.content[1] == ToolCall(id="call_1", name="read", arguments={})

    d1 = b.toolcall_delta('{"path":"not')
    assert d1.delta == '{"path":"not'
    assert d1.partial.content[1] == ToolCall(id="call_1", name="read", arguments={})
    d2 = b.toolcall_delta('es.txt"}')
    assert d2.partial.content[1].arguments == {"path": "notes.txt"}  # type: ignore[union-attr]

    end = b.toolcall_end()
    assert end.tool_call == ToolCall(id="call_1", name="read", arguments={"path": "notes.txt"})
    assert end.partial.content[1] == end.tool_call

    done = b.done()
    assert done.reason == "toolUse"
    assert done.message.stop_reason == "toolUse"
    assert done.message.tool_calls == (end.tool_call,)


def test_tool_call_brace_inside_a_string_is_not_complete() -> None:
    b = builder()
    b.start()
    b.toolcall_start("c", "write")
    delta = b.toolcall_delta('{"content":"a}')
    assert delta.partial.content[0].arguments == {}  # type: ignore[union-attr]
    b.toolcall_delta('b"}')
    assert b.toolcall_end().tool_call.arguments == {"content": "a}b"}


def test_tool_call_end_with_explicit_or_bad_arguments() -> None:
    b = builder()
    b.start()
    b.toolcall_start("a", "bash", thought_signature="ts")
    b.toolcall_delta('{"command": "ls"')  # never closed
    end = b.toolcall_end()
    assert end.tool_call == ToolCall(id="a", name="bash", arguments={}, thought_signature="ts")

    b.toolcall_start("b", "bash")
    assert b.toolcall_end().tool_call.arguments == {}  # no JSON at all

    b.toolcall_start("c", "bash")
    b.toolcall_delta("garbage")
    end = b.toolcall_end(arguments={"command": "pwd"})
    assert end.tool_call.arguments == {"command": "pwd"}
    assert end.content_index == 2


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_arguments("[1]") is None
    assert parse_arguments('{"a"') is None


def test_error_keeps_streamed_content() -> None:
    b = builder(usage=Usage(input=5, total_tokens=5))
    b.start()
    b.text_start()
    b.text_delta("partial ans")
    event = b.error("error", "503 Service Unavailable")
    assert isinstance(event, StreamError)
    assert event.reason == "error"
    message = event.error
    assert message.stop_reason == "error"
    assert message.error_message == "503 Service Unavailable"
    assert message.content == (TextContent(text="partial ans"),)
    assert message.usage.input == 5
    assert b.finished
    with pytest.raises(StreamStateError):
        b.text_delta("more")
    with pytest.raises(StreamStateError):
        b.done()


def test_error_before_start() -> None:
    b = builder()
    event = b.error("error", "connection refused")
    assert event.error.content == ()
    assert event.error.error_message == "connection refused"


def test_abort() -> None:
    b = builder()
    b.start()
    b.text_start()
    b.text_delta("Slow answer")
    event = b.abort()
    assert event.reason == "aborted"
    assert event.error.stop_reason == "aborted"
    assert event.error.error_message == ABORTED_MESSAGE == "Request was aborted"
    assert event.error.content == (TextContent(text="Slow answer"),)


def test_initial_fields_show_on_every_partial() -> None:
    usage = Usage(input=10, output=3, total_tokens=13)
    b = builder(usage=usage, error_message="boom")
    assert b.start().partial.usage == usage
    assert b.partial.stop_reason == "pending"
    assert b.partial.error_message == "boom"
    later = Usage(input=11, total_tokens=11)
    b.set_usage(later)
    b.set_response_id("resp_1", "faux-1-2026")
    assert b.text_start().partial.usage == later
    assert b.partial.response_id == "resp_1"
    assert b.partial.response_model == "faux-1-2026"
    assert b.partial.raw_stop_reason is None


def test_raw_stop_reason_shows_on_later_partials_and_the_final_message() -> None:
    b = builder()
    b.start()
    b.toolcall_start("call_1", "read")
    b.set_raw_stop_reason("tool_calls")
    delta = b.toolcall_delta('{"path":"a"}')
    assert delta.partial.raw_stop_reason == "tool_calls"
    assert delta.partial.stop_reason == "pending"
    b.toolcall_end()
    done = b.done()
    assert (done.message.stop_reason, done.message.raw_stop_reason) == ("toolUse", "tool_calls")
    keys = list(to_json(done.message))
    assert keys[keys.index("timestamp") + 1 :] == ["rawStopReason"]


def test_length_reason_and_explicit_indexes() -> None:
    b = builder()
    b.start()
    b.text_start()
    b.toolcall_start("x", "read")
    # Two blocks open at once: explicit indexes address each, the default is the newest.
    b.text_delta("ab", index=0)
    b.toolcall_delta("{}")
    assert b.open_indexes == (0, 1)
    b.toolcall_end()
    b.text_end(index=0)
    assert b.done("length").reason == "length"


def test_protocol_misuse_raises() -> None:
    b = builder()
    with pytest.raises(StreamStateError):
        b.text_start()  # before start
    b.start()
    with pytest.raises(StreamStateError):
        b.start()
    with pytest.raises(StreamStateError):
        b.text_delta("x")  # nothing open
    b.thinking_start()
    with pytest.raises(StreamStateError):
        b.text_delta("x")  # the open block is thinking
    with pytest.raises(StreamStateError):
        b.text_end(index=5)
    with pytest.raises(StreamStateError):
        b.done()  # a block is still open


def test_for_model_and_failure_helpers() -> None:
    model = FAUX_MODELS[0]
    b = StreamBuilder.for_model(model)
    assert (b.partial.api, b.partial.provider, b.partial.model) == ("faux-api", "faux", "faux-1")

    failed = failure_message(model, "no route")
    assert failed.content == ()
    assert failed.stop_reason == "error"
    assert failed.error_message == "no route"

    b.start()
    b.text_start()
    b.text_delta("half")
    aborted = aborted_message(b.partial)
    assert aborted.stop_reason == "aborted"
    assert aborted.error_message == ABORTED_MESSAGE
    assert aborted.content == (TextContent(text="half"),)


def test_snapshots_share_finished_blocks() -> None:
    """Appending a delta rebuilds only the streaming block, not the earlier ones."""
    b = builder()
    b.start()
    b.text_start()
    b.text_delta("first")
    first_block = b.text_end().partial.content[0]
    b.text_start()
    snapshot = b.text_delta("second").partial
    assert snapshot.content[0] is first_block


_blocks = st.lists(
    st.tuples(
        st.sampled_from(["text", "thinking", "toolCall"]),
        st.lists(st.text(max_size=5), max_size=4),
    ),
    max_size=4,
)


@given(_blocks)
def test_partials_track_deltas(blocks: list[tuple[str, list[str]]]) -> None:
    """Any sequence of blocks: indexes count up, each partial holds exactly the deltas so far,
    earlier blocks never change, and the final message holds every block."""
    b = builder()
    b.start()
    finished: list[object] = []
    for index, (kind, chunks) in enumerate(blocks):
        if kind == "text":
            assert b.text_start().content_index == index
            for n, chunk in enumerate(chunks):
                partial = b.text_delta(chunk).partial
                assert partial.content[index] == TextContent(text="".join(chunks[: n + 1]))
                assert list(partial.content[:index]) == finished
            finished.append(b.text_end().partial.content[index])
        elif kind == "thinking":
            assert b.thinking_start().content_index == index
            for n, chunk in enumerate(chunks):
                partial = b.thinking_delta(chunk).partial
                expected = ThinkingContent(thinking="".join(chunks[: n + 1]))
                assert partial.content[index] == expected
                assert list(partial.content[:index]) == finished
            finished.append(b.thinking_end().partial.content[index])
        else:
            assert b.toolcall_start(f"id{index}", "tool").content_index == index
            for chunk in chunks:
                assert list(b.toolcall_delta(chunk).partial.content[:index]) == finished
            finished.append(b.toolcall_end(arguments={"i": index}).tool_call)
    message = b.done().message
    assert list(message.content) == finished
    assert message.stop_reason == ("toolUse" if any(k == "toolCall" for k, _ in blocks) else "stop")


def test_thinking_block_given_whole_and_error_diagnostics() -> None:
    from pitrio.actors.model_router.diagnostics import error_diagnostic
    from pitrio.messages import ThinkingContent

    builder = StreamBuilder(api="a", provider="p", model="m", timestamp=1)
    builder.start()
    started = builder.thinking_start("[Reasoning redacted]")
    assert started.partial.content == (ThinkingContent(thinking="[Reasoning redacted]"),)
    end = builder.thinking_end(signature="opaque", redacted=True)
    assert end.content == "[Reasoning redacted]"
    diagnostic = error_diagnostic("500 boom", name="HttpError", status=500, timestamp=1)
    failed = builder.error("error", "500 boom", diagnostics=(diagnostic,))
    assert failed.error.diagnostics == (diagnostic,)
    assert failed.error.content == (
        ThinkingContent(
            thinking="[Reasoning redacted]", thinking_signature="opaque", redacted=True
        ),
    )


def test_a_diagnostic_added_shows_on_later_snapshots_and_the_final_message() -> None:
    from pitrio.messages.agent import Diagnostic

    fallback = Diagnostic(type="anthropic_thread_fallback", timestamp=1, details={"reason": "x"})
    b = builder()
    assert b.partial.diagnostics is None
    b.add_diagnostic(fallback)
    b.start()
    assert b.partial.diagnostics == (fallback,)
    assert b.done().message.diagnostics == (fallback,)
    # A failure's own diagnostic comes after the ones added before it.
    failing = builder()
    failing.add_diagnostic(fallback)
    own = Diagnostic(type="error", timestamp=2)
    error = failing.error("error", "boom", diagnostics=(own,))
    assert error.error.diagnostics == (fallback, own)
