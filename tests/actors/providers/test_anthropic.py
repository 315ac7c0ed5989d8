"""The anthropic-messages provider: request building, the sans-IO parser, real HTTP."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pitrio.actors.model_router.providers.anthropic import build_body, build_request
from pitrio.actors.model_router.providers.anthropic_stream import (
    REDACTED_THINKING_TEXT,
    AnthropicParser,
)
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.messages import ImageContent, TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.codec import to_json
from pitrio.messages.delta_run import DeltaRun, expand_events
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import ThinkingEnd, ThinkingStart
from tests.actors.providers.loopback import LoopbackServer, recording, sse
from tests.actors.providers.support import (
    CONTEXT,
    SECRET,
    assistant,
    collect,
    final,
    kinds,
    make_model,
    make_provider,
    parse_all,
    tool_result,
    tool_turn,
)

API = "anthropic-messages"
MODEL = make_model(API)
SETTINGS = ProviderSettings()


# -- request ---------------------------------------------------------------------------------


def test_request_shape_and_cache_control() -> None:
    request = build_request(
        MODEL, CONTEXT, StreamOptions(), api_key=SECRET, headers={}, settings=SETTINGS
    )
    assert request.url == "http://127.0.0.1:9/v1/messages?beta=true"  # pi 1.6.0: the beta client
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    # pi's Anthropic SDK client: JSON accepted, browser use allowed; no beta for a model that
    # does not think (1.6.0 asks for interleaved thinking only when thinking is on).
    assert request.headers["anthropic-dangerous-direct-browser-access"] == "true"
    assert "anthropic-beta" not in request.headers
    body = request.json()
    assert list(body) == ["model", "messages", "max_tokens", "stream", "system", "tools"]
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["max_tokens"] == 16384
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    # The schema reduced to properties and required names; the cache mark on the last tool.
    assert body["tools"][-1] == {
        "name": "bash",
        "description": "Run a command",
        "eager_input_streaming": True,
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": [],
        },
        "cache_control": {"type": "ephemeral"},
    }
    assert all("cache_control" not in tool for tool in body["tools"][:-1])
    late = make_model(API, compat={"supportsEagerToolInputStreaming": False})
    late_request = build_request(
        late, CONTEXT, StreamOptions(), api_key=SECRET, headers={}, settings=SETTINGS
    )
    assert "eager_input_streaming" not in late_request.json()["tools"][0]
    assert late_request.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"
    long = build_body(MODEL, CONTEXT, StreamOptions(), ProviderSettings(cache_retention="long"))
    assert long["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    none = build_body(MODEL, CONTEXT, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert "cache_control" not in none["system"][0]


def test_auth_header_flag_adds_bearer() -> None:
    model = make_model(API, compat={"authHeader": True})
    request = build_request(
        model, CONTEXT, StreamOptions(), api_key=SECRET, headers={}, settings=SETTINGS
    )
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def test_thinking_budget_fits_max_tokens() -> None:
    model = make_model(API, reasoning=True, max_tokens=64000)
    body = build_body(model, CONTEXT, StreamOptions(reasoning="medium"), SETTINGS)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192, "display": "summarized"}
    assert body["max_tokens"] == 32000 + 8192
    custom = ProviderSettings(thinking_budgets={"high": 20000})
    body = build_body(model, CONTEXT, StreamOptions(reasoning="high"), custom)
    assert body["thinking"]["budget_tokens"] == 20000
    small = make_model(API, reasoning=True, max_tokens=4096)
    body = build_body(small, CONTEXT, StreamOptions(reasoning="high"), SETTINGS)
    assert body["max_tokens"] == 4096
    assert body["thinking"]["budget_tokens"] == 4096 - 1024
    # A reasoning model with thinking off is told so.
    assert build_body(model, CONTEXT, StreamOptions(), SETTINGS)["thinking"] == {"type": "disabled"}
    plain = make_model(API)  # not a reasoning model: the level is ignored
    assert "thinking" not in build_body(plain, CONTEXT, StreamOptions(reasoning="high"), SETTINGS)
    headers = build_request(
        model,
        CONTEXT,
        StreamOptions(reasoning="low"),
        api_key=SECRET,
        headers={},
        settings=SETTINGS,
    ).headers
    assert "interleaved-thinking" in headers["anthropic-beta"]
    off = build_request(
        model, CONTEXT, StreamOptions(), api_key=SECRET, headers={}, settings=SETTINGS
    ).headers
    assert "anthropic-beta" not in off  # thinking off: no interleaved-thinking beta


def test_adaptive_models_get_an_effort_and_no_interleaved_beta() -> None:
    model = make_model(API, id="claude-opus-4-6", reasoning=True)
    request = build_request(
        model, CONTEXT, StreamOptions(reasoning="minimal"), api_key=SECRET, headers={},
        settings=SETTINGS,
    )  # fmt: skip
    body = request.json()
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "low"}
    assert "anthropic-beta" not in request.headers
    high = build_body(model, CONTEXT, StreamOptions(reasoning="xhigh"), SETTINGS)
    assert high["output_config"] == {"effort": "high"}


def test_tool_results_are_text_or_blocks_with_images() -> None:
    image = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="toolu_1", name="read", arguments={})
    result = ToolResultMessage(
        tool_call_id="toolu_1", tool_name="read", content=(image,), is_error=False, timestamp=3
    )
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("q", timestamp=1),
            assistant(call, api=API, stop_reason="toolUse"),
            result,
        ),
    )
    body = build_body(MODEL, context, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "(see attached image)"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}},
            ],
            "is_error": False,
        }
    ]  # fmt: skip


def test_signed_and_redacted_thinking_go_back_unchanged() -> None:
    previous = assistant(
        ThinkingContent(thinking="plan", thinking_signature="sig=="),
        ThinkingContent(
            thinking=REDACTED_THINKING_TEXT, thinking_signature="opaque", redacted=True
        ),
        ThinkingContent(thinking="unsigned"),
        TextContent(text="done"),
        api=API,
    )
    context = LlmContext(
        system_prompt="",
        messages=(user_message("q", timestamp=1), previous, user_message("again", timestamp=3)),
    )
    body = build_body(MODEL, context, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "unsigned"},
        {"type": "text", "text": "done"},
    ]
    # From another model, thinking is plain text and redacted thinking is dropped.
    foreign = LlmContext(
        system_prompt="",
        messages=(
            user_message("q", timestamp=1),
            assistant(*previous.content, api="openai-completions", model="gpt"),
        ),
    )
    body = build_body(MODEL, foreign, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "plan"},
        {"type": "text", "text": "unsigned"},
        {"type": "text", "text": "done"},
    ]


def test_tool_results_are_grouped_in_one_user_turn_with_ids_normalized() -> None:
    calls = (
        ToolCall(id="call_1|fc_1", name="read", arguments={"path": "a"}),
        ToolCall(id="call.2", name="read", arguments={"path": "b"}),
    )
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("q", timestamp=1),
            assistant(*calls, api="openai-responses", stop_reason="toolUse"),
            tool_result("call_1|fc_1", "A"),
            tool_result("call.2", "B", error=True),
        ),
    )
    body = build_body(MODEL, context, StreamOptions(), SETTINGS)
    assert [b["id"] for b in body["messages"][1]["content"]] == ["call_1_fc_1", "call_2"]
    results = body["messages"][2]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["call_1_fc_1", "call_2"]
    assert results["content"][1]["is_error"] is True
    assert results["content"][1]["cache_control"] == {"type": "ephemeral"}


def test_missing_tool_result_gets_a_synthetic_error_and_failed_turns_are_skipped() -> None:
    call = ToolCall(id="toolu_1", name="read", arguments={})
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("q", timestamp=1),
            assistant(call, api=API, stop_reason="toolUse"),
            user_message("never mind", timestamp=3),
            assistant(TextContent(text="half"), api=API, stop_reason="error"),
            tool_result("toolu_gone", "orphan"),
        ),
    )
    body = build_body(MODEL, context, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user", "user"]
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "No result provided",
            "is_error": True,
        }
    ]


def test_tool_round_trip_body() -> None:
    body = build_body(
        MODEL, tool_turn(API), StreamOptions(), ProviderSettings(cache_retention="none")
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.txt"}},
        ],
    }


# -- parser ----------------------------------------------------------------------------------


def test_parse_text_with_cache_usage() -> None:
    events = parse_all(AnthropicParser(MODEL), recording("anthropic_text.sse"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == (TextContent(text="Hello, world! Ünïcödé ✓"),)
    # pi 1.6.0 records the answering model when it is not the one asked for (the recording's
    # is not "test-model"; tests/interop/test_pi_message_threads.py checks it against pi).
    assert (message.response_id, message.response_model) == (
        "msg_01A",
        "claude-sonnet-4-5-20250929",
    )
    same = make_model(API, id="claude-sonnet-4-5-20250929")
    asked = final(parse_all(AnthropicParser(same), recording("anthropic_text.sse")))
    assert asked.response_model is None
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (25, 12, 100, 50)
    assert usage.total_tokens == 187
    assert math.isclose(usage.cost.total, (25 * 2 + 12 * 10 + 100 * 0.5 + 50 * 2.5) / 1e6)
    # pi 1.6.0: the one-hour cache writes (none in this recording) set after the cost, and
    # the cost marked as computed; the raw stop reason is Anthropic's own
    assert usage.cache_write_1h == 0 and list(to_json(usage))[-1] == "cacheWrite1h"
    assert usage.cost.total_from_provider is False
    assert message.raw_stop_reason == "end_turn"


def test_parse_thinking_signatures_redacted_and_parallel_tools() -> None:
    events = parse_all(AnthropicParser(MODEL), recording("anthropic_thinking_tools.sse"))
    message = final(events)
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ThinkingContent(
            thinking="I should read the file first.",
            thinking_signature="EqQBCkYIBxgCKkBsig-tail==",
        ),
        ThinkingContent(
            thinking=REDACTED_THINKING_TEXT,
            thinking_signature="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx",
            redacted=True,
        ),
        TextContent(text="Reading both."),
        ToolCall(
            id="toolu_01X",
            name="read",
            arguments={"path": "src/main.py", "note": 'café "quoted"'},
        ),
        ToolCall(id="toolu_01Y", name="bash", arguments={"command": "ls -la | grep 'π'"}),
    )
    redacted_start = [e for e in events if isinstance(e, ThinkingStart)][1]
    assert redacted_start.partial.content[1] == ThinkingContent(thinking=REDACTED_THINKING_TEXT)
    assert [e.content_index for e in events if isinstance(e, ThinkingEnd)] == [0, 1]
    assert (message.usage.input, message.usage.cache_read, message.usage.output) == (300, 2000, 180)


@pytest.mark.parametrize(
    ("stop_reason", "expected", "error"),
    [
        ("max_tokens", "length", None),
        ("end_turn", "stop", None),
        ("pause_turn", "stop", None),
        ("refusal", "error", "The model declined to answer (stop_reason refusal)"),
        (
            "model_context_window_exceeded",
            "error",
            "model_context_window_exceeded: the request exceeds the context window",
        ),
    ],
)
def test_parse_stop_reasons(stop_reason: str, expected: str, error: str | None) -> None:
    raw = recording("anthropic_text.sse").replace(b'"end_turn"', f'"{stop_reason}"'.encode())
    message = final(parse_all(AnthropicParser(MODEL), raw))
    assert (message.stop_reason, message.error_message) == (expected, error)


def test_parse_error_event_mid_stream() -> None:
    raw = recording("anthropic_text.sse")
    cut = raw[: raw.index(b"event: content_block_stop")]
    cut += (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    message = final(parse_all(AnthropicParser(MODEL), cut))
    assert message.stop_reason == "error"
    # pi's text: the Anthropic SDK shows the whole event as JSON
    assert message.error_message == (
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    )
    assert message.content == (TextContent(text="Hello, world! Ünïcödé ✓"),)


def test_parse_cut_short() -> None:
    raw = recording("anthropic_text.sse")
    cut = raw[: raw.index(b"event: message_stop")]
    message = final(parse_all(AnthropicParser(MODEL), cut))
    assert message.error_message == (
        "The anthropic-messages stream ended without message_stop (the response was cut short)"
    )


# -- over HTTP -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anthropic_text.sse", "anthropic_thinking_tools.sse"])
async def test_streams_over_http(server: LoopbackServer, pool: HttpPool, name: str) -> None:
    body = recording(name)
    server.push(sse(body, chunk_size=5))
    model = make_model(API, server.base_url, reasoning=True)
    events = await collect(make_provider(API, pool), model, options=StreamOptions(reasoning="low"))
    expected = parse_all(AnthropicParser(model), body)
    assert kinds(events) == kinds(expected)
    got, want = final(events), final(expected)
    assert (got.content, got.usage, got.stop_reason) == (want.content, want.usage, want.stop_reason)
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/messages?beta=true")
    assert request.headers["x-api-key"] == SECRET
    assert request.json()["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
        "display": "summarized",
    }


@pytest.mark.parametrize("retention", ["short", "none"])
def test_a_growing_transcript_is_encoded_incrementally_and_exactly(retention: str) -> None:
    import orjson

    from pitrio.actors.model_router.providers import anthropic as module
    from pitrio.messages import ImageContent

    settings = ProviderSettings(cache_retention=retention)  # type: ignore[arg-type]
    image = ImageContent(data="AAAA", mime_type="image/png")
    first_call = ToolCall(id="call_1", name="read", arguments={"path": "a"})
    second_call = ToolCall(id="call_2", name="read", arguments={"path": "b"})
    steps = [
        user_message("one"),
        assistant(TextContent(text="first"), api=API),
        user_message("two"),
        assistant(first_call, second_call, api=API, stop_reason="toolUse"),
        tool_result("call_1", "a's text"),  # the second result comes a request later
        tool_result("call_2", "b's text").__class__(
            tool_call_id="call_2", tool_name="read", content=(image,), is_error=False, timestamp=4
        ),
        assistant(ThinkingContent(thinking="hm"), TextContent(text="x"), api="elsewhere"),
        user_message("three"),
        assistant(TextContent(text="last"), api=API),
    ]
    messages: list[object] = []
    for step in steps:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))  # type: ignore[arg-type]
        plain = orjson.dumps(build_body(MODEL, context, StreamOptions(), settings))
        body = build_body(MODEL, context, StreamOptions(), settings, encoded=True)
        encoded = body_bytes(encode_json_pieces(body))
        assert encoded == plain, f"after {len(messages)} messages"
    kept = [(src, b) for src, b in module._PREFIXES.states() if src and src[0] is steps[0]]
    assert (
        kept and list(kept[0][0]) == messages and len(kept[0][1].fragments)
    )  # earlier turns encoded


def test_a_cached_transcript_is_rebuilt_for_a_model_without_images() -> None:
    # See the Chat Completions test of the same name: a model differing only in its input
    # kinds gets its own conversion, not the kept one of the other.
    import orjson

    settings = ProviderSettings()
    image = ImageContent(data="AAAA", mime_type="image/png")
    with_images, without = make_model(API), make_model(API, image=False)
    messages: list[object] = []
    for step in [
        user_message("one"),
        user_message("two").__class__(content=(image,), timestamp=2),
        assistant(TextContent(text="seen"), api=API),
        user_message("three"),
        assistant(TextContent(text="again"), api=API),
        user_message("four"),
    ]:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))  # type: ignore[arg-type]
        for model in (with_images, without, with_images):
            plain = orjson.dumps(build_body(model, context, StreamOptions(), settings))
            body = build_body(model, context, StreamOptions(), settings, encoded=True)
            assert body_bytes(encode_json_pieces(body)) == plain, f"{model.input}: {len(messages)}"


def test_a_request_that_turns_caching_off_gets_no_cache_control() -> None:
    # pi 1.6.0's summary calls carry cacheRetention "none" over the provider's setting.
    options = StreamOptions(session_id="s-1", cache_retention="none")
    body = build_body(MODEL, CONTEXT, options, ProviderSettings(cache_retention="short"))
    assert "cache_control" not in body["system"][0]
    assert all("cache_control" not in block for m in body["messages"] for block in m["content"])
    # And the other way: the request's own retention wins over a setting of none.
    longer = StreamOptions(cache_retention="long")
    body = build_body(MODEL, CONTEXT, longer, ProviderSettings(cache_retention="none"))
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def _sse_event(kind: str, **fields: Any) -> tuple[str, str]:
    return kind, json.dumps({"type": kind, **fields})


def _text_delta(index: int, text: str) -> tuple[str, str]:
    return _sse_event(
        "content_block_delta", index=index, delta={"type": "text_delta", "text": text}
    )


def _anthropic_stream(bad_at: int | None) -> list[tuple[str, str]]:
    """Text blocks in runs around a thinking block and a tool call, a usage change, an
    empty text delta, and (at ``bad_at``) an undecodable delta."""
    usage = {"input_tokens": 5, "output_tokens": 1}
    out = [_sse_event("message_start", message={"id": "msg_1", "model": "m", "usage": usage})]
    out.append(_sse_event("content_block_start", index=0, content_block={"type": "text"}))
    out += [_text_delta(0, f"a{n} ") for n in range(9)] + [_text_delta(0, "")]
    out.append(_sse_event("ping"))
    out += [_text_delta(0, f"b{n}") for n in range(5)]
    out.append(_sse_event("content_block_stop", index=0))
    out.append(_sse_event("content_block_start", index=1, content_block={"type": "thinking"}))
    think = {"type": "thinking_delta", "thinking": "hm"}
    out += [_sse_event("content_block_delta", index=1, delta=think)] * 3
    out.append(_sse_event("content_block_stop", index=1))
    out.append(_sse_event("content_block_start", index=2, content_block={"type": "text"}))
    out += [_text_delta(2, f"c{n}") for n in range(6)]
    out.append(_sse_event("message_delta", delta={}, usage={"output_tokens": 7}))
    out += [_text_delta(2, f"d{n}") for n in range(4)] + [_text_delta(9, "unknown block")]
    out.append(_sse_event("content_block_stop", index=2))
    call = {"type": "tool_use", "id": "t1", "name": "read", "input": {}}
    out.append(_sse_event("content_block_start", index=3, content_block=call))
    json_delta = {"type": "input_json_delta", "partial_json": '{"path": "a"}'}
    out.append(_sse_event("content_block_delta", index=3, delta=json_delta))
    out.append(_sse_event("content_block_stop", index=3))
    out.append(_sse_event("message_delta", delta={"stop_reason": "tool_use"}))
    out.append(_sse_event("message_stop"))
    if bad_at is not None:
        out.insert(bad_at, ("content_block_delta", '{"type": "content_block_delta", "ind'))
    return out


@pytest.mark.parametrize("bad_at", [None, 5, 30])
@pytest.mark.parametrize("cut", [1, 3, 8, 64])
def test_text_deltas_read_at_once_go_as_runs_and_expand_to_one_feed_per_event(
    bad_at: int | None, cut: int
) -> None:
    """``feed_all`` hands consecutive text deltas of one block over as one DeltaRun (issue
    38); expanded, with reads cut anywhere, the events are those of one feed per event: the
    same deltas, partials (read at the end), usage, the error where a delta is undecodable."""
    stream = _anthropic_stream(bad_at)
    whole = AnthropicParser(MODEL)
    whole.builder = StreamBuilder.for_model(MODEL, timestamp=1)
    expected = [event for name, data in stream for event in whole.feed(name, data)]
    parser = AnthropicParser(MODEL)
    parser.builder = StreamBuilder.for_model(MODEL, timestamp=1)
    items: list[Any] = []
    for start in range(0, len(stream), cut):
        read, last, fed = parser.feed_all(stream[start : start + cut])
        items += read + last
        if parser.finished:
            assert last and fed <= cut
            break
    assert [to_json(e) for e in expand_events(items)] == [to_json(e) for e in expected]
    runs = [item for item in items if isinstance(item, DeltaRun)]
    if cut == 64 and bad_at is None:  # the first block's ten deltas, and the third's six
        assert [len(run) for run in runs] == [10, 5, 6, 4]
    for run in runs:
        assert {partial.usage for partial in run.partials()} == {run.header.usage}
