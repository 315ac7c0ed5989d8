"""The openai-responses provider: request building, the sans-IO parser, real HTTP."""

from __future__ import annotations

from collections.abc import Mapping

import orjson
import pytest

from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.actors.model_router.providers.openai_responses import (
    OpenAIResponsesParser,
    build_body,
    build_request,
)
from pitrio.messages import TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.model import LlmContext, StreamOptions
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
)

API = "openai-responses"
MODEL = make_model(API)


# -- request ---------------------------------------------------------------------------------


def test_request_shape() -> None:
    request = build_request(
        MODEL,
        CONTEXT,
        StreamOptions(session_id="s-1", max_tokens=100),
        api_key=SECRET,
        headers={},
    )
    assert request.url == "http://127.0.0.1:9/responses"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["session-id"] == request.headers["x-client-request-id"] == "s-1"
    body = request.json()
    assert list(body) == [
        "model", "input", "stream", "prompt_cache_key", "store", "max_output_tokens", "tools"
    ]  # fmt: skip
    assert body["store"] is False and body["stream"] is True
    # pi sends the system prompt as the first input item, not as ``instructions``.
    assert body["input"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
    ]
    thinker = build_body(make_model(API, reasoning=True), CONTEXT, StreamOptions())
    assert thinker["input"][0] == {"role": "developer", "content": "You are terse."}
    # pi 1.6.0: no ``strict`` unless the model's compat says the server takes strict tools.
    assert body["tools"][0] == {
        "type": "function",
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    assert body["prompt_cache_key"] == "s-1"
    assert body["max_output_tokens"] == 100
    assert "reasoning" not in body and "include" not in body


def test_cache_retention_none_sends_no_cache_key_and_no_session_headers() -> None:
    # pi: with caching off the session id is neither the prompt-cache key nor a header.
    options = StreamOptions(session_id="s-1")
    request = build_request(
        MODEL, CONTEXT, options, api_key=SECRET, headers={}, cache_retention="none"
    )
    assert "session-id" not in request.headers
    assert "x-client-request-id" not in request.headers
    body = request.json()
    assert "prompt_cache_key" not in body and "prompt_cache_retention" not in body


def test_cache_retention_long_asks_for_a_day_where_the_model_allows_it() -> None:
    options = StreamOptions(session_id="s-1")
    body = build_body(MODEL, CONTEXT, options, cache_retention="long")
    assert list(body)[:6] == [
        "model", "input", "stream", "prompt_cache_key", "prompt_cache_retention", "store"
    ]  # fmt: skip
    assert body["prompt_cache_retention"] == "24h"
    short = make_model(API, compat={"supportsLongCacheRetention": False})
    assert "prompt_cache_retention" not in build_body(
        short, CONTEXT, options, cache_retention="long"
    )
    assert "prompt_cache_retention" not in build_body(MODEL, CONTEXT, options)


def test_session_affinity_headers_by_format() -> None:
    options = StreamOptions(session_id="s-1")
    router = make_model(API, "https://openrouter.ai/api/v1", provider="openrouter")
    headers = build_request(router, CONTEXT, options, api_key=SECRET, headers={}).headers
    assert headers["x-session-id"] == "s-1"
    assert "session-id" not in headers and "x-client-request-id" not in headers
    other = make_model(API, compat={"sessionAffinityFormat": "none"})
    headers = build_request(other, CONTEXT, options, api_key=SECRET, headers={}).headers
    assert "session-id" not in headers and headers["x-client-request-id"] == "s-1"


def test_openai_nosession_keeps_only_the_request_id() -> None:
    # pi 1.6.0 replaced compat.sendSessionIdHeader (0.73.1) with this format.
    quiet = make_model(API, compat={"sessionAffinityFormat": "openai-nosession"})
    request = build_request(
        quiet, CONTEXT, StreamOptions(session_id="s-1"), api_key=SECRET, headers={}
    )
    assert "session-id" not in request.headers
    assert request.headers["x-client-request-id"] == "s-1"
    assert request.json()["prompt_cache_key"] == "s-1"


def test_send_session_id_header_is_ignored_as_pi_1_6_ignores_it() -> None:
    # 0.73.1 left session-id out for sendSessionIdHeader: false; 1.6.0 dropped the key.
    old = make_model(API, compat={"sendSessionIdHeader": False})
    request = build_request(
        old, CONTEXT, StreamOptions(session_id="s-1"), api_key=SECRET, headers={}
    )
    assert request.headers["session-id"] == "s-1"
    assert request.headers["x-client-request-id"] == "s-1"


def test_the_providers_cache_retention_setting_reaches_the_request() -> None:
    settings = ProviderSettings(cache_retention="none")
    provider = make_provider(API, HttpPool(), settings=settings)
    request = provider.build_request(
        MODEL, CONTEXT, StreamOptions(session_id="s-1"), api_key=SECRET, headers={}
    )
    assert "x-client-request-id" not in request.headers
    assert "prompt_cache_key" not in request.json()


def test_output_limit_defaults_to_the_models_capped() -> None:
    assert build_body(MODEL, CONTEXT, StreamOptions())["max_output_tokens"] == 16384
    large = make_model(API, max_tokens=400000)
    assert build_body(large, CONTEXT, StreamOptions())["max_output_tokens"] == 32000
    assert "max_output_tokens" not in build_body(
        make_model(API, max_tokens=0), CONTEXT, StreamOptions()
    )


def test_reasoning_effort_and_encrypted_content() -> None:
    model = make_model(API, reasoning=True, levels={"off": "none", "minimal": None})
    body = build_body(model, CONTEXT, StreamOptions(reasoning="minimal"))
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}  # clamped upward
    assert body["include"] == ["reasoning.encrypted_content"]
    off = build_body(model, CONTEXT, StreamOptions())
    assert off["reasoning"] == {"effort": "none"} and "include" not in off
    # Without a map the off effort is still "none".
    plain = make_model(API, reasoning=True)
    assert build_body(plain, CONTEXT, StreamOptions(reasoning="off"))["reasoning"] == {
        "effort": "none"
    }


def test_own_items_go_back_with_their_ids_foreign_text_with_pi_s() -> None:
    reasoning_item = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "enc",
    }
    own = assistant(
        ThinkingContent(thinking="plan", thinking_signature=orjson.dumps(reasoning_item).decode()),
        TextContent(text="Reading.", text_signature='{"v":1,"id":"msg_1"}'),
        ToolCall(id="call_1|fc_1", name="read", arguments={"path": "a"}),
        api=API,
        stop_reason="toolUse",
    )
    context = LlmContext(
        system_prompt="",
        messages=(user_message("q", timestamp=1), own, tool_result("call_1|fc_1", "A")),
    )
    items = build_body(MODEL, context, StreamOptions())["input"]
    assert items[1] == reasoning_item
    assert items[2] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
        "status": "completed",
        "id": "msg_1",
    }
    assert items[3] == {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read",
        "arguments": '{"path":"a"}',
    }
    assert list(items[3]) == ["type", "id", "call_id", "name", "arguments"]  # pi's order
    assert items[4] == {"type": "function_call_output", "call_id": "call_1", "output": "A"}

    foreign = LlmContext(
        system_prompt="",
        messages=(
            user_message("q", timestamp=1),
            assistant(*own.content, api="anthropic-messages", model="claude"),
            tool_result("call_1|fc_1", "A"),
        ),
    )
    items = build_body(MODEL, foreign, StreamOptions())["input"]
    assert items[1]["content"][0]["text"] == "plan"  # thinking became text
    # A text item without its own id gets pi's msg_<place of the message in the transcript>.
    assert items[1]["id"] == items[2]["id"] == "msg_1"
    assert items[3] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "read",
        "arguments": '{"path":"a"}',
    }


# -- parser ----------------------------------------------------------------------------------


def test_parse_text() -> None:
    events = parse_all(OpenAIResponsesParser(MODEL), recording("openai_responses_text.sse"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == (
        TextContent(text="Hello, world! Ünïcödé ✓", text_signature='{"v":1,"id":"msg_68a2"}'),
    )
    # pi 0.73.1 records the answering model for Chat Completions only.
    assert (message.response_id, message.response_model) == ("resp_68a1", None)
    assert (message.usage.input, message.usage.cache_read, message.usage.output) == (200, 1000, 9)


def test_parse_reasoning_summary_and_parallel_function_calls() -> None:
    events = parse_all(
        OpenAIResponsesParser(MODEL), recording("openai_responses_reasoning_tools.sse")
    )
    message = final(events)
    assert message.stop_reason == "toolUse"
    thinking, read, bash = message.content
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "**Planning**\n\nI should read the file.\n\nThen list it."
    item = orjson.loads(thinking.thinking_signature or "")
    assert item["encrypted_content"] == "gAAAAABoENCRYPTED==" and item["id"] == "rs_77b2"
    assert read == ToolCall(
        id="call_Xa1|fc_77b3",
        name="read",
        arguments={"path": "src/main.py", "note": 'café "quoted"'},
    )
    assert bash == ToolCall(
        id="call_Yb2|fc_77b4", name="bash", arguments={"command": "ls -la | grep 'π'"}
    )
    assert message.usage.output == 240


def test_parse_incomplete_and_failed() -> None:
    def ending(event: str, response: Mapping[str, object]) -> str:
        parser = OpenAIResponsesParser(MODEL)
        parser.feed("response.output_text.delta", '{"type":"response.output_text.delta",'
                    '"item_id":"m","delta":"partial"}')  # fmt: skip
        payload = orjson.dumps({"type": event, "response": response}).decode()
        message = final(parser.feed(event, payload))
        assert message.content[0] == TextContent(text="partial")
        return f"{message.stop_reason}: {message.error_message}"

    incomplete = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    assert ending("response.incomplete", incomplete) == "length: None"
    filtered = {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
    assert ending("response.incomplete", filtered) == (
        "error: The response is incomplete (content_filter)"
    )
    failed = {"status": "failed", "error": {"code": "server_error", "message": "boom"}}
    assert ending("response.failed", failed) == "error: server_error: boom"


def test_parse_error_event_and_cut_short() -> None:
    parser = OpenAIResponsesParser(MODEL)
    message = final(
        parser.feed(
            "error",
            '{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached",'
            '"param":null}',
        )
    )
    assert message.error_message == "Error Code rate_limit_exceeded: Rate limit reached"
    raw = recording("openai_responses_text.sse")
    cut = raw[: raw.index(b"event: response.completed")]
    message = final(parse_all(OpenAIResponsesParser(MODEL), cut))
    assert message.error_message == (
        "The openai-responses stream ended without response.completed (the response was cut short)"
    )


# -- over HTTP -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["openai_responses_text.sse", "openai_responses_reasoning_tools.sse"]
)
async def test_streams_over_http(server: LoopbackServer, pool: HttpPool, name: str) -> None:
    body = recording(name)
    server.push(sse(body, chunk_size=11))
    model = make_model(API, server.base_url)
    events = await collect(make_provider(API, pool), model)
    expected = parse_all(OpenAIResponsesParser(model), body)
    assert kinds(events) == kinds(expected)
    got, want = final(events), final(expected)
    assert (got.content, got.usage, got.stop_reason) == (want.content, want.usage, want.stop_reason)
    assert (server.requests[0].method, server.requests[0].path) == ("POST", "/responses")


def test_a_growing_transcript_is_encoded_incrementally_and_exactly() -> None:
    from pitrio.actors.model_router.providers import openai_responses as module
    from pitrio.messages import ImageContent

    image = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="call_1|fc_1", name="read", arguments={"path": "a"})
    steps = [
        user_message("one"),
        assistant(TextContent(text="first"), api=API),
        user_message("two"),
        assistant(call, api=API, stop_reason="toolUse"),  # its result comes a request later
        tool_result("call_1|fc_1", "").__class__(
            tool_call_id="call_1|fc_1",
            tool_name="read",
            content=(image,),
            is_error=False,
            timestamp=3,
        ),
        assistant(ThinkingContent(thinking="hm"), TextContent(text="x"), api="elsewhere"),
        user_message("three"),
    ]
    messages: list[object] = []
    for step in steps:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))  # type: ignore[arg-type]
        plain = orjson.dumps(build_body(MODEL, context, StreamOptions()))
        encoded = orjson.dumps(build_body(MODEL, context, StreamOptions(), encoded=True))
        assert encoded == plain, f"after {len(messages)} messages"
    kept = [(src, b) for src, b in module._PREFIXES.states() if src and src[0] is steps[0]]
    assert kept and list(kept[0][0]) == messages


def test_a_cached_transcript_is_rebuilt_for_a_model_without_images() -> None:
    # The same provider, API, id and base URL, one model taking images and one not (a
    # reloaded models.json): the kept conversion of the first must not serve the second.
    from pitrio.messages import ImageContent

    image = ImageContent(data="AAAA", mime_type="image/png")
    with_images, without = make_model(API), make_model(API, image=False)
    messages: list[object] = []
    for step in [
        user_message("one"),
        user_message("two").__class__(content=(image,), timestamp=2),
        assistant(TextContent(text="seen"), api=API),
        user_message("three"),
    ]:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))  # type: ignore[arg-type]
        for model in (with_images, without, with_images):
            plain = orjson.dumps(build_body(model, context, StreamOptions()))
            encoded = orjson.dumps(build_body(model, context, StreamOptions(), encoded=True))
            assert encoded == plain, f"{model.input}: {len(messages)}"


def test_a_request_that_turns_caching_off_sends_no_cache_key_over_the_setting() -> None:
    provider = make_provider(API, HttpPool(), settings=ProviderSettings(cache_retention="short"))
    options = StreamOptions(session_id="s-1", cache_retention="none")
    request = provider.build_request(MODEL, CONTEXT, options, api_key=SECRET, headers={})
    assert "x-client-request-id" not in request.headers
    assert "prompt_cache_key" not in request.json()
