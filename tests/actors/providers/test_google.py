"""The google-generative-ai provider: the Gemini body, the sans-IO parser, real HTTP.

The loopback vendor speaks the documented wire format of ``streamGenerateContent?alt=sse``:
each SSE ``data:`` event is a whole ``GenerateContentResponse``; the body just ends.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.providers.google import (
    UNKNOWN_ERROR,
    GoogleParser,
    GoogleProvider,
    build_body,
    build_contents,
    build_request,
    thinking_config,
)
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages import ImageContent, TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, TextDelta
from tests.actors.providers.loopback import LoopbackServer, Reply, json_error, sse
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

API = "google-generative-ai"
SETTINGS = ProviderSettings()
SIG = "c2lnbmF0dXJl"  # base64 of "signature"


def model(base_url: str = "http://127.0.0.1:9", **kwargs: Any) -> Any:
    kwargs.setdefault("id", "gemini-2.5-flash")
    return make_model(API, base_url, **kwargs)


def gemini_sse(*chunks: dict[str, Any]) -> bytes:
    """An SSE body of ``GenerateContentResponse`` chunks as the API sends them."""
    return b"".join(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n" for chunk in chunks)


def parts(*items: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(items)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "responseId": "resp-1", "modelVersion": "gemini-2.5-flash"}


USAGE = {
    "usageMetadata": {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 200,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 70,
        "totalTokenCount": 1300,
    }
}

THINKING_TOOL_TURN = gemini_sse(
    parts({"text": "Let me ", "thought": True}),
    parts({"text": "look.", "thought": True, "thoughtSignature": SIG}),
    parts({"text": "Reading the file."}),
    parts(
        {"functionCall": {"name": "read", "args": {"path": "a.txt"}}, "thoughtSignature": SIG},
        {"functionCall": {"name": "bash", "args": {"command": "ls"}}},
        finish="STOP",
    )
    | USAGE,
)


# -- request ---------------------------------------------------------------------------------


def test_request_shape() -> None:
    request = build_request(
        model(), CONTEXT, StreamOptions(), api_key=SECRET, headers={"X-Extra": "1"},
        settings=SETTINGS,
    )  # fmt: skip
    assert request.url == (
        "http://127.0.0.1:9/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert request.headers["x-goog-api-key"] == SECRET
    assert request.headers["x-extra"] == "1"
    assert "authorization" not in request.headers
    assert request.json() == {
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "You are terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "read",
                        "description": "Read a file",
                        "parametersJsonSchema": {
                            "type": "object",
                            "properties": {"path": {"type": "string"}},
                        },
                    },
                    {
                        "name": "bash",
                        "description": "Run a command",
                        "parametersJsonSchema": {
                            "type": "object",
                            "properties": {"command": {"type": "string"}},
                        },
                    },
                ]
            }
        ],
        "generationConfig": {"maxOutputTokens": 16384},
    }


@pytest.mark.parametrize(
    ("model_id", "level", "expected"),
    [
        ("gemini-2.5-flash", None, {"thinkingBudget": 0}),
        ("gemini-2.5-flash", "medium", {"includeThoughts": True, "thinkingBudget": 8192}),
        ("gemini-2.5-pro", "high", {"includeThoughts": True, "thinkingBudget": 32768}),
        ("gemini-2.5-flash-lite", "minimal", {"includeThoughts": True, "thinkingBudget": 512}),
        ("gemini-2.0-thinking", "low", {"includeThoughts": True, "thinkingBudget": -1}),
        ("gemini-3-pro-preview", None, {"thinkingLevel": "LOW"}),
        ("gemini-3-pro-preview", "medium", {"includeThoughts": True, "thinkingLevel": "HIGH"}),
        ("gemini-3-flash-preview", None, {"thinkingLevel": "MINIMAL"}),
        ("gemini-3-flash-preview", "medium", {"includeThoughts": True, "thinkingLevel": "MEDIUM"}),
        ("gemma-4-27b", "low", {"includeThoughts": True, "thinkingLevel": "MINIMAL"}),
    ],
)
def test_thinking_config_per_model_family(
    model_id: str, level: Any, expected: dict[str, Any]
) -> None:
    assert thinking_config(model(id=model_id, reasoning=True), level) == expected


def test_thinking_budgets_setting_overrides_and_plain_models_send_none() -> None:
    thinker = model(reasoning=True)
    assert thinking_config(thinker, "high", {"high": 999}) == {
        "includeThoughts": True,
        "thinkingBudget": 999,
    }
    assert thinking_config(model(), "high") is None
    body = build_body(thinker, CONTEXT, StreamOptions(reasoning="low", max_tokens=500), SETTINGS)
    assert body["generationConfig"] == {
        "maxOutputTokens": 500,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }


def test_signatures_go_back_to_the_same_model_only_and_only_as_base64() -> None:
    mine = model()
    turn = assistant(
        ThinkingContent(thinking="plan", thinking_signature=SIG),
        TextContent(text="Reading.", text_signature="not base64!"),
        ToolCall(id="c1", name="read", arguments={"path": "a"}, thought_signature=SIG),
        api=API,
        model=mine.id,
        stop_reason="toolUse",
    )
    context = LlmContext(
        system_prompt="",
        messages=(user_message("go", timestamp=1), turn, tool_result("c1", "A")),
    )
    assert build_contents(mine, context)[1] == {
        "role": "model",
        "parts": [
            {"thought": True, "text": "plan", "thoughtSignature": SIG},
            {"text": "Reading."},
            {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": SIG},
        ],
    }
    other = model(id="gemini-2.5-pro")
    assert build_contents(other, context)[1] == {
        "role": "model",
        "parts": [
            {"text": "plan"},
            {"text": "Reading."},
            {"functionCall": {"name": "read", "args": {"path": "a"}}},
        ],
    }


def test_tool_results_share_one_user_turn_and_images_follow_the_model_generation() -> None:
    calls = (
        ToolCall(id="c1", name="read", arguments={}),
        ToolCall(id="c2", name="bash", arguments={}),
    )
    picture = ImageContent(data="aW1n", mime_type="image/png")
    shot = ToolResultMessage(
        tool_call_id="c2", tool_name="bash", content=(picture,), is_error=True, timestamp=3
    )

    def context_for(model_id: str) -> LlmContext:
        turn = assistant(*calls, api=API, model=model_id, stop_reason="toolUse")
        return LlmContext(
            system_prompt="",
            messages=(user_message("go", timestamp=1), turn, tool_result("c1", "A"), shot),
        )

    old = build_contents(model(), context_for("gemini-2.5-flash"))
    assert old[2:] == [
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "A"}}},
                {"functionResponse": {"name": "bash",
                                      "response": {"error": "(see attached image)"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"text": "Tool result image:"},
                {"inlineData": {"mimeType": "image/png", "data": "aW1n"}},
            ],
        },
    ]  # fmt: skip
    new = build_contents(model(id="gemini-3-pro"), context_for("gemini-3-pro"))
    assert new[2]["parts"][1]["functionResponse"]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": "aW1n"}}
    ]
    assert len(new) == 3
    claude = model(id="claude-sonnet-4-5")
    ids = build_contents(claude, context_for("claude-sonnet-4-5"))
    assert ids[1]["parts"][0]["functionCall"]["id"] == "c1"
    assert ids[2]["parts"][0]["functionResponse"]["id"] == "c1"


def test_user_images_are_inline_data() -> None:
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("see", (ImageContent(data="aW1n", mime_type="image/jpeg"),), timestamp=1),
        ),
    )
    assert build_contents(model(), context) == [
        {
            "role": "user",
            "parts": [{"text": "see"}, {"inlineData": {"mimeType": "image/jpeg", "data": "aW1n"}}],
        }
    ]


# -- the parser ------------------------------------------------------------------------------


def test_parse_thinking_signatures_tools_usage_and_cost() -> None:
    events = parse_all(GoogleParser(model()), THINKING_TOOL_TURN)
    assert kinds(events) == [
        "start",
        "thinking_start", "thinking_delta", "thinking_end",
        "text_start", "text_delta", "text_end",
        "toolcall_start", "toolcall_delta", "toolcall_end",
        "toolcall_start", "toolcall_delta", "toolcall_end",
        "done",
    ]  # fmt: skip
    message = final(events)
    thinking, text, read, bash = message.content
    assert thinking == ThinkingContent(thinking="Let me look.", thinking_signature=SIG)
    assert text == TextContent(text="Reading the file.")
    assert isinstance(read, ToolCall) and isinstance(bash, ToolCall)
    assert (read.name, read.arguments, read.thought_signature) == ("read", {"path": "a.txt"}, SIG)
    assert (bash.name, bash.arguments, bash.thought_signature) == ("bash", {"command": "ls"}, None)
    assert read.id.startswith("read_") and bash.id.startswith("bash_") and read.id != bash.id
    assert message.stop_reason == "toolUse"
    assert message.response_id == "resp-1"
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (1000, 100, 200, 0)
    assert usage.total_tokens == 1300
    # Prices per million: input 2, output 10, cache read 0.5.
    assert usage.cost.total == pytest.approx((1000 * 2 + 100 * 10 + 200 * 0.5) / 1e6)


def test_given_call_ids_are_kept_unless_repeated() -> None:
    body = gemini_sse(
        parts(
            {"functionCall": {"id": "x1", "name": "read", "args": {}}},
            {"functionCall": {"id": "x1", "name": "read", "args": {}}},
            finish="STOP",
        )
    )
    first, second = final(parse_all(GoogleParser(model()), body)).content
    assert isinstance(first, ToolCall) and isinstance(second, ToolCall)
    assert first.id == "x1" and second.id != "x1"


@pytest.mark.parametrize(
    ("finish", "stop", "error"),
    [
        ("STOP", "stop", None),
        ("MAX_TOKENS", "length", None),
        ("SAFETY", "error", UNKNOWN_ERROR),
        ("MALFORMED_FUNCTION_CALL", "error", UNKNOWN_ERROR),
    ],
)
def test_finish_reasons(finish: str, stop: str, error: str | None) -> None:
    body = gemini_sse(parts({"text": "Hi"}), parts({"text": "!"}, finish=finish))
    message = final(parse_all(GoogleParser(model()), body))
    assert message.stop_reason == stop
    assert message.error_message == error
    assert message.content == (TextContent(text="Hi!"),)


def test_error_chunk_mid_stream_keeps_the_partial_content() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    body = gemini_sse(parts({"text": "Hi"}), error)
    message = final(parse_all(GoogleParser(model()), body))
    assert message.stop_reason == "error"
    assert message.error_message == (
        "got status: UNAVAILABLE. "
        '{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}'
    )
    assert message.content == (TextContent(text="Hi"),)


# -- over HTTP -------------------------------------------------------------------------------


async def test_streams_a_thinking_tool_turn_over_http(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(sse(THINKING_TOOL_TURN, chunk_size=7))
    thinker = model(server.base_url, reasoning=True)
    provider = GoogleProvider(pool, credentials())
    events = await collect(provider, thinker, options=StreamOptions(reasoning="low"))
    expected = parse_all(GoogleParser(thinker), THINKING_TOOL_TURN)
    assert kinds(events) == kinds(expected)
    got = final(events)
    assert got.stop_reason == "toolUse" and got.usage.output == 100
    assert [type(block).__name__ for block in got.content] == [
        "ThinkingContent", "TextContent", "ToolCall", "ToolCall"
    ]  # fmt: skip
    request = server.requests[0]
    assert (request.method, request.path) == (
        "POST",
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    )
    assert request.headers["x-goog-api-key"] == SECRET
    assert request.headers["accept"] == "*/*"  # what pi's Google SDK (fetch) sends
    assert request.json()["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingBudget": 2048,
    }


async def test_error_bodies_are_pi_s_texts(server: LoopbackServer, pool: HttpPool) -> None:
    invalid = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
        }
    }
    server.push(
        json_error(400, invalid),
        Reply(status=404, body=b"Not Found", headers=[("content-type", "text/html")]),
    )
    provider = GoogleProvider(pool, credentials())
    first = final(await collect(provider, model(server.base_url)))
    assert first.stop_reason == "error"
    assert first.error_message == (
        '{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.",'
        '"status":"INVALID_ARGUMENT"}}'
    )
    second = final(await collect(provider, model(server.base_url)))
    assert second.error_message == (
        '{"error":{"message":"Not Found","code":404,"status":"Not Found"}}'
    )


async def test_a_429_is_not_repeated_quietly(server: LoopbackServer) -> None:
    # pi's Google SDK makes one request; the failure goes to the agent's auto-retry (which
    # honours retry-after), whatever retry.provider.maxRetries says.
    busy = {
        "error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}
    }
    server.push(
        json_error(429, busy, {"retry-after": "2"}),
        sse(gemini_sse(parts({"text": "ok"}, finish="STOP"))),
    )
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        message = final(
            await collect(GoogleProvider(retrying, credentials()), model(server.base_url))
        )
    finally:
        await retrying.aclose()
    assert message.stop_reason == "error" and "Resource exhausted." in (message.error_message or "")
    assert len(server.requests) == 1


async def test_abort_mid_stream_closes_the_connection(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(sse(gemini_sse(parts({"text": "Hel"})), ending="hang"))
    provider = GoogleProvider(pool, credentials())
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    seen: list[AssistantMessageEvent] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, TextDelta):
                    nursery.cancel_scope.cancel()

        nursery.start_soon(consume)
        await provider.stream(model(server.base_url), CONTEXT, StreamOptions(), send)
        pytest.fail("the stream should have been cancelled")  # pragma: no cover
    assert seen[-1].type == "text_delta"
    with trio.fail_after(5):
        await server.client_gone.wait()


def test_a_tool_round_trip_is_sent_as_pi_0_73_1_sends_it() -> None:
    """``contents`` of pi's second request in the same exchange (captured from pi 0.73.1
    against a loopback Gemini): the parsed answer goes back with its signatures."""
    answer = gemini_sse(
        parts(
            {"text": "hmm", "thought": True, "thoughtSignature": SIG},
            {"text": "Reading."},
            {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
             "thoughtSignature": "dG9vbHNpZw=="},
            finish="STOP",
        )
    )  # fmt: skip
    mine = model(provider="gm")
    reply = final(parse_all(GoogleParser(mine), answer))
    call = reply.content[-1]
    assert isinstance(call, ToolCall)
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("read a.txt", timestamp=1),
            reply,
            tool_result(call.id, "contents of a\n"),
        ),
    )
    assert build_contents(mine, context) == [
        {"parts": [{"text": "read a.txt"}], "role": "user"},
        {
            "parts": [
                {"text": "hmm", "thought": True, "thoughtSignature": SIG},
                {"text": "Reading."},
                {"functionCall": {"args": {"path": "a.txt"}, "name": "read"},
                 "thoughtSignature": "dG9vbHNpZw=="},
            ],
            "role": "model",
        },
        {"parts": [{"functionResponse": {"name": "read",
                                         "response": {"output": "contents of a\n"}}}],
         "role": "user"},
    ]  # fmt: skip
