"""The mistral-conversations provider: request building, the sans-IO parser, real HTTP."""

from __future__ import annotations

import math

import pytest
import trio

from pitrio.actors.agent_loop.decisions import aborted_text
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.providers.base import HttpSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.actors.model_router.providers.mistral import (
    MistralParser,
    MistralProvider,
    ToolIdMap,
    build_body,
    build_request,
    pi_short_hash,
)
from pitrio.messages import ImageContent, TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import (
    AssistantMessageEvent,
    StreamError,
    TextDelta,
    ToolCallEnd,
)
from tests.actors.providers import mistral_mock as mock
from tests.actors.providers.loopback import LoopbackServer, sse
from tests.actors.providers.support import (
    CONTEXT,
    SECRET,
    assistant,
    collect,
    credentials,
    final,
    kinds,
    make_model,
    parse_all,
    tool_result,
)

API = "mistral-conversations"
MODEL = make_model(API, id="mistral-large-latest")
PIXEL = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")


def provider(pool: HttpPool) -> MistralProvider:
    return MistralProvider(pool, credentials())


# -- request ---------------------------------------------------------------------------------


def test_request_shape() -> None:
    request = build_request(
        MODEL,
        CONTEXT,
        StreamOptions(max_tokens=512, session_id="sess-1"),
        api_key=SECRET,
        headers={"X-Extra": "1"},
    )
    assert request.url == "http://127.0.0.1:9/v1/chat/completions"  # the SDK's path
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["x-extra"] == "1"
    assert request.headers["x-affinity"] == "sess-1"  # prefix-cache affinity
    body = request.json()
    # pi 1.6.0 builds the body itself: the fields it renames to wire names come last.
    assert list(body) == ["model", "stream", "messages", "tools", "max_tokens", "prompt_cache_key"]
    assert body["model"] == "mistral-large-latest"
    assert body["stream"] is True
    assert body["max_tokens"] == 512
    assert body["prompt_cache_key"] == "sess-1"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": False,
        },
    }
    assert list(body["tools"][0]["function"]) == ["name", "description", "parameters", "strict"]


def test_no_cache_key_nor_affinity_when_caching_is_off() -> None:
    options = StreamOptions(session_id="sess-1")
    request = build_request(
        MODEL, CONTEXT, options, api_key=SECRET, headers={}, cache_retention="none"
    )
    assert "x-affinity" not in request.headers
    assert "prompt_cache_key" not in request.json()


def test_configured_affinity_header_wins_and_no_session_sends_none() -> None:
    options = StreamOptions(session_id="sess-1")
    request = build_request(MODEL, CONTEXT, options, api_key=SECRET, headers={"X-Affinity": "me"})
    assert request.headers["x-affinity"] == "me"
    plain = build_request(MODEL, CONTEXT, StreamOptions(), api_key=SECRET, headers={})
    assert "x-affinity" not in plain.headers


def _tool_turn(model: str) -> LlmContext:
    call = ToolCall(id="call_1", name="read", arguments={"path": "a.txt"})
    failing = ToolCall(id="call_2", name="bash", arguments={"command": "false"})
    return LlmContext(
        system_prompt="sys",
        messages=(
            user_message("read a.txt", timestamp=1),
            assistant(
                ThinkingContent(thinking="I should read it."),
                TextContent(text="Reading."),
                TextContent(text="   "),
                call,
                failing,
                api=API,
                model=model,
                stop_reason="toolUse",
            ),
            tool_result("call_1", "contents of a"),
            tool_result("call_2", "", "bash", error=True),
        ),
    )


def test_a_tool_turn_of_the_same_model_goes_back_as_it_was() -> None:
    messages = build_body(MODEL, _tool_turn("mistral-large-latest"), StreamOptions())["messages"]
    # The SDK's defaults ("index" on calls, "prefix") are in pi's requests: sent too.
    assert messages[2] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "I should read it."}]},
            {"type": "text", "text": "Reading."},
        ],
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path":"a.txt"}'},
                "index": 0,
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command":"false"}'},
                "index": 0,
            },
        ],
        "prefix": False,
    }
    assert messages[3] == {
        "role": "tool",
        "content": [{"type": "text", "text": "contents of a"}],
        "tool_call_id": "call_1",
        "name": "read",
    }
    # pi 1.6.0's key orders (0.73.1's SDK sent role, content, tool_call_id, name and the
    # assistant's prefix last).
    assert list(messages[2]) == ["role", "prefix", "content", "tool_calls"]
    assert list(messages[3]) == ["role", "name", "content", "tool_call_id"]
    assert messages[4]["content"] == [{"type": "text", "text": "[tool error] (no tool output)"}]


def test_a_foreign_tool_turn_gets_nine_character_ids_as_pi_derives_them() -> None:
    messages = build_body(MODEL, _tool_turn("another-model"), StreamOptions())["messages"]
    # pi's shortHash("call1") / ("call2") cut to nine characters (computed with pi's function).
    calls = messages[2]["tool_calls"]
    assert [call["id"] for call in calls] == ["1j55k0s7o", _derive("call2")]
    assert [m["tool_call_id"] for m in messages[3:5]] == ["1j55k0s7o", _derive("call2")]
    # Another model's thinking goes as text.
    assert messages[2]["content"][0] == {"type": "text", "text": "I should read it."}


def _derive(cleaned: str) -> str:
    return pi_short_hash(cleaned)[:9]


def test_tool_id_map_keeps_valid_ids_and_separates_collisions() -> None:
    ids = ToolIdMap()
    assert ids("D681PevKs") == "D681PevKs"
    # "call-1" and "call_1" clean to the same text: the second gets a derived id of its own.
    first, second = ids("call-1"), ids("call_1")
    assert first == "1j55k0s7o"
    assert second == "1qe29241w"  # pi's shortHash("call1:1"), nine characters
    assert ids("call-1") == first


def test_images_go_as_data_urls_or_placeholders() -> None:
    context = LlmContext(
        system_prompt=None,
        messages=(
            user_message("look", (PIXEL,), timestamp=1),
            assistant(
                ToolCall(id="abcdefghi", name="read", arguments={}), api=API, stop_reason="toolUse"
            ),
            tool_result("abcdefghi", "").__class__(
                tool_call_id="abcdefghi",
                tool_name="read",
                content=(PIXEL,),
                is_error=False,
                timestamp=3,
            ),
        ),
    )
    url = "data:image/png;base64,iVBORw0KGgo="
    seeing = build_body(MODEL, context, StreamOptions())["messages"]
    assert seeing[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": url},
    ]
    assert seeing[2]["content"] == [
        {"type": "text", "text": "(see attached image)"},
        {"type": "image_url", "image_url": url},
    ]
    blind = build_body(make_model(API, image=False), context, StreamOptions())["messages"]
    assert all("image_url" not in str(entry) for entry in blind)


@pytest.mark.parametrize(
    ("model_id", "levels", "reasoning", "expected"),
    [
        ("magistral-medium-latest", None, "high", {"prompt_mode": "reasoning"}),
        ("magistral-medium-latest", None, None, {}),
        ("mistral-small-latest", None, "medium", {"reasoning_effort": "high"}),
        ("mistral-small-latest", {"medium": "low"}, "medium", {"reasoning_effort": "low"}),
    ],
)
def test_thinking_levels(
    model_id: str,
    levels: dict[str, str | None] | None,
    reasoning: str | None,
    expected: dict[str, str],
) -> None:
    model = make_model(API, id=model_id, reasoning=True, levels=levels)
    body = build_body(model, CONTEXT, StreamOptions(reasoning=reasoning))  # type: ignore[arg-type]
    assert {k: body[k] for k in ("prompt_mode", "reasoning_effort") if k in body} == expected
    plain = build_body(MODEL, CONTEXT, StreamOptions(reasoning="high"))
    assert "prompt_mode" not in plain and "reasoning_effort" not in plain


# -- parser ----------------------------------------------------------------------------------


def test_text_usage_and_cost() -> None:
    events = parse_all(
        MistralParser(MODEL), mock.text_stream("Hello", " world", prompt=1000, completion=500)
    )
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == (TextContent(text="Hello world"),)
    assert message.stop_reason == "stop"
    assert message.response_id == "cmpl-0a1b2c"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (
        1000,
        500,
        1500,
    )
    # $2 and $10 per million tokens.
    assert message.usage.cost.total == pytest.approx(0.002 + 0.005)


def test_thinking_chunks_then_text() -> None:
    events = parse_all(MistralParser(MODEL), mock.thinking_stream())
    assert kinds(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    message = final(events)
    assert message.content[0] == ThinkingContent(thinking="Let me think.")
    assert message.content[1] == TextContent(text="Answer: 42")


def test_tool_calls_in_pieces_and_whole() -> None:
    events = parse_all(MistralParser(MODEL), mock.tool_stream())
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [e.tool_call.name for e in ends] == ["read", "bash"]
    message = final(events)
    assert message.stop_reason == "toolUse"
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    assert calls[0] == ToolCall(id="D681PevKs", name="read", arguments={"path": "a.txt"})
    # An id of "null" becomes pi's "toolcall<index>"; object arguments are taken as they are.
    assert calls[1] == ToolCall(id="toolcall1", name="bash", arguments={"command": "ls"})
    assert message.content[0] == TextContent(text="Reading.")


@pytest.mark.parametrize(("finish", "reason"), [("length", "length"), ("model_length", "length")])
def test_length_stops(finish: str, reason: str) -> None:
    raw = mock.body(mock.chunk({"content": "cut"}, finish=finish))
    assert final(parse_all(MistralParser(MODEL), raw)).stop_reason == reason


def test_an_error_finish_reason_fails_with_pi_s_text() -> None:
    raw = mock.body(mock.chunk({"content": "partial"}, finish="error"))
    message = final(parse_all(MistralParser(MODEL), raw))
    assert message.stop_reason == "error"
    assert message.error_message == "An unknown error occurred"
    assert message.content == (TextContent(text="partial"),)


def test_a_body_cut_short_is_an_error() -> None:
    raw = mock.body(mock.chunk({"content": "half"}), done=False)
    message = final(parse_all(MistralParser(MODEL), raw))
    assert message.stop_reason == "error"
    assert "cut short" in (message.error_message or "")


# -- real HTTP -------------------------------------------------------------------------------


async def test_streams_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(mock.text_stream("Hel", "lo"), chunk_size=7))
    model = make_model(API, server.base_url, id="mistral-large-latest")
    events = await collect(provider(pool), model, options=StreamOptions(session_id="s-9"))
    assert final(events).content == (TextContent(text="Hello"),)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["x-affinity"] == "s-9"
    assert request.json()["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}],
    }


async def test_a_429_is_not_repeated_and_reads_as_pi_s_mistral_error(
    server: LoopbackServer,
) -> None:
    # Even with a pool allowing retries: pi runs Mistral's SDK with retries off, so the
    # session's auto-retry (which matches "429") decides.
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        server.push(
            mock.error(429, "Requests rate limit exceeded", "rate_limited", {"retry-after": "2"}),
            mock.ok(),
        )
        events = await collect(provider(retrying), make_model(API, server.base_url))
    finally:
        await retrying.aclose()
    assert [e.type for e in events] == ["error"]
    message = final(events)
    assert message.error_message == (
        'Mistral API error (429): {"object":"error","message":"Requests rate limit exceeded",'
        '"type":"rate_limited","param":null,"code":null}'
    )
    assert len(server.requests) == 1


async def test_a_long_error_body_is_cut_as_pi_cuts_it(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(mock.error(400, "x" * 5000, "invalid_request_error"))
    message = final(await collect(provider(pool), make_model(API, server.base_url)))
    text = message.error_message or ""
    assert text.startswith('Mistral API error (400): {"object":"error","message":"xxx')
    assert text.endswith("... [truncated 1087 chars]")  # the body is 5087 characters


async def test_an_unauthorised_key_never_leaks(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(mock.error(401, f"Invalid key {SECRET}", "unauthorized"))
    message = final(await collect(provider(pool), make_model(API, server.base_url)))
    assert (message.error_message or "").startswith("Mistral API error (401): ")
    assert SECRET not in (message.error_message or "")


async def test_abort_mid_stream_closes_the_connection(
    server: LoopbackServer, pool: HttpPool
) -> None:
    raw = mock.text_stream("Hello", " world")
    server.push(sse(raw[: raw.index(b" world")], ending="hang"))
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    seen: list[AssistantMessageEvent] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, TextDelta):
                    nursery.cancel_scope.cancel()

        nursery.start_soon(consume)
        await provider(pool).stream(
            make_model(API, server.base_url), CONTEXT, StreamOptions(), send
        )
        pytest.fail("the stream should have been cancelled")  # pragma: no cover
    assert not any(isinstance(e, StreamError) for e in seen)
    assert seen[-1].type == "text_delta"
    with trio.fail_after(5):
        await server.client_gone.wait()


def test_the_router_registers_the_api() -> None:
    router = ModelRouter.from_config(RouterConfig(catalogue=False))
    assert router.registry.has_stream_fn(API)


def test_an_abort_before_the_response_reads_as_the_mistral_sdk_words_it() -> None:
    assert aborted_text(API, responded=False) == "Request aborted by client"
    assert aborted_text(API, responded=True) == "Request was aborted"  # pi's own, once streaming
