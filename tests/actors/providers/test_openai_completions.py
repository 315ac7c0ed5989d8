"""The openai-completions provider: request building, the sans-IO parser, real HTTP."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio

from pitrio.actors.model_router.providers.http import HANDOVER, HttpPool
from pitrio.actors.model_router.providers.openai_completions import (
    OpenAICompletionsParser,
    build_body,
    build_request,
    detect_compat,
)
from pitrio.messages import ImageContent, TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.codec import to_json
from pitrio.messages.delta_run import DeltaRun, expand_events
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import TextDelta, ToolCallDelta, ToolCallEnd
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

API = "openai-completions"
MODEL = make_model(API)


# -- request ---------------------------------------------------------------------------------


def test_request_shape() -> None:
    request = build_request(
        MODEL, CONTEXT, StreamOptions(max_tokens=512), api_key=SECRET, headers={"X-Extra": "1"}
    )
    assert request.url == "http://127.0.0.1:9/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["x-extra"] == "1"
    body = request.json()
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 512
    assert "store" not in body  # only OpenAI itself knows "store"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},  # pi: parts
    ]
    # pi's key order (JSON.stringify of the object as it builds it).
    assert list(body) == ["model", "messages", "stream", "stream_options", "max_tokens", "tools"]
    assert [tool["function"]["name"] for tool in body["tools"]] == ["read", "bash"]
    assert body["tools"][0]["type"] == "function"


def test_openai_itself_gets_developer_role_store_and_max_completion_tokens() -> None:
    model = make_model(API, "https://api.openai.com/v1", provider="openai", reasoning=True)
    body = build_body(model, CONTEXT, StreamOptions(reasoning="high", max_tokens=100))
    assert body["messages"][0]["role"] == "developer"
    assert body["store"] is False
    assert body["max_completion_tokens"] == 100
    keys = list(body)  # pi's order: store before the token limit
    head = ["model", "messages", "stream", "stream_options", "store", "max_completion_tokens"]
    assert keys[: len(head)] == head
    assert body["reasoning_effort"] == "high"
    # pi 1.6.0: OpenAI's own server no longer implies strict tools (only compat does).
    assert all("strict" not in tool["function"] for tool in body["tools"])


def test_output_limit_defaults_to_the_models_capped() -> None:
    # pi asks every request for the model's output limit, at most 32,000 tokens.
    assert build_body(MODEL, CONTEXT, StreamOptions())["max_tokens"] == 16384
    large = make_model(API, max_tokens=128000)
    assert build_body(large, CONTEXT, StreamOptions())["max_tokens"] == 32000
    assert build_body(large, CONTEXT, StreamOptions(max_tokens=64))["max_tokens"] == 64
    unknown = make_model(API, max_tokens=0)
    assert "max_tokens" not in build_body(unknown, CONTEXT, StreamOptions())


def test_strict_flag_on_tools_only_where_the_server_takes_it() -> None:
    assert all(
        "strict" not in tool["function"]
        for tool in build_body(MODEL, CONTEXT, StreamOptions())["tools"]
    )
    told = make_model(API, compat={"supportsStrictMode": True})
    assert all(
        tool["function"]["strict"] is False
        for tool in build_body(told, CONTEXT, StreamOptions())["tools"]
    )
    refused = make_model(
        API, "https://api.openai.com/v1", provider="openai", compat={"supportsStrictMode": False}
    )
    assert all(
        "strict" not in tool["function"]
        for tool in build_body(refused, CONTEXT, StreamOptions())["tools"]
    )


def test_tool_round_trip_messages() -> None:
    body = build_body(MODEL, tool_turn(API), StreamOptions())
    assert body["messages"][1:] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a.txt"}'},
                }
            ],
        },
        {"role": "tool", "content": "contents of a", "tool_call_id": "call_1"},
    ]
    assert list(body["messages"][-1]) == ["role", "content", "tool_call_id"]  # pi's order


def test_images_and_tool_result_images() -> None:
    image = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="call_1", name="read", arguments={})
    result = tool_result("call_1", "")
    result = result.__class__(
        tool_call_id="call_1", tool_name="read", content=(image,), is_error=False, timestamp=3
    )
    context = LlmContext(
        system_prompt="",
        messages=(
            user_message("look", timestamp=1).__class__(
                content=(TextContent(text="look"), image), timestamp=1
            ),
            assistant(call, api=API, stop_reason="toolUse"),
            result,
        ),
    )
    messages = build_body(MODEL, context, StreamOptions())["messages"]
    assert messages[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }
    assert messages[2] == {
        "role": "tool",
        "content": "(see the attached image)",
        "tool_call_id": "call_1",
    }
    assert messages[3]["role"] == "user"  # the tool's image follows as a user message
    assert messages[3]["content"][1]["type"] == "image_url"
    text_only = make_model(API, image=False)
    messages = build_body(text_only, context, StreamOptions())["messages"]
    assert [part["type"] for part in messages[0]["content"]] == ["text", "text"]
    assert "image omitted" in messages[0]["content"][1]["text"]
    assert len(messages) == 3  # no image message for a text-only model


def test_thinking_formats_and_compat_flags() -> None:
    reasoning = make_model(API, reasoning=True)
    assert build_body(reasoning, CONTEXT, StreamOptions(reasoning="low"))["reasoning_effort"] == (
        "low"
    )
    assert "reasoning_effort" not in build_body(reasoning, CONTEXT, StreamOptions())
    router = make_model(API, "https://openrouter.ai/api/v1", provider="openrouter", reasoning=True)
    body = build_body(router, CONTEXT, StreamOptions(reasoning="medium"))
    assert body["reasoning"] == {"effort": "medium"}
    zai = make_model(API, reasoning=True, compat={"thinkingFormat": "zai"})
    assert build_body(zai, CONTEXT, StreamOptions())["thinking"] == {"type": "disabled"}
    qwen = make_model(API, reasoning=True, compat={"thinkingFormat": "qwen"})
    assert build_body(qwen, CONTEXT, StreamOptions(reasoning="high"))["enable_thinking"] is True
    plain = make_model(
        API,
        reasoning=True,
        compat={
            "supportsReasoningEffort": False,
            "supportsUsageInStreaming": False,
            "maxTokensField": "max_completion_tokens",
            "openRouterRouting": {"only": ["x"]},
        },
    )
    body = build_body(plain, CONTEXT, StreamOptions(reasoning="high", max_tokens=5))
    assert "reasoning_effort" not in body
    assert "stream_options" not in body
    assert body["max_completion_tokens"] == 5
    assert body["provider"] == {"only": ["x"]}
    mapped = make_model(API, reasoning=True, levels={"minimal": "low", "off": "none"})
    assert build_body(mapped, CONTEXT, StreamOptions(reasoning="minimal"))["reasoning_effort"] == (
        "low"
    )
    assert build_body(mapped, CONTEXT, StreamOptions())["reasoning_effort"] == "none"


def test_mistral_compat_ids_names_and_thinking_as_text() -> None:
    model = make_model(API, "https://api.mistral.ai/v1", provider="mistral")
    compat = detect_compat(model)
    assert compat.requires_mistral_tool_ids and compat.requires_tool_result_name
    context = tool_turn(API)
    messages = list(context.messages)
    messages[1] = assistant(
        ThinkingContent(thinking="hmm"),
        *messages[1].content,
        api=API,
        provider="mistral",
        stop_reason="toolUse",
    )
    body = build_body(
        model, LlmContext(system_prompt="", messages=tuple(messages)), StreamOptions()
    )
    call_id = body["messages"][1]["tool_calls"][0]["id"]
    assert len(call_id) == 9 and call_id.isalnum()
    assert body["messages"][2] == {
        "role": "tool",
        "content": "contents of a",
        "tool_call_id": call_id,
        "name": "read",
    }
    assert list(body["messages"][2]) == ["role", "content", "tool_call_id", "name"]
    assert body["messages"][1]["content"] == "hmmReading."


def test_long_and_responses_style_ids_are_shortened_consistently() -> None:
    long_id = "x" * 60
    for call_id, expected in (("call_a|fc_b", "call_a"), (long_id, None)):
        call = ToolCall(id=call_id, name="read", arguments={})
        context = LlmContext(
            system_prompt="",
            messages=(
                user_message("q", timestamp=1),
                assistant(call, api="other", stop_reason="toolUse"),
                tool_result(call_id, "r"),
            ),
        )
        messages = build_body(MODEL, context, StreamOptions())["messages"]
        sent = messages[1]["tool_calls"][0]["id"]
        assert messages[2]["tool_call_id"] == sent
        assert len(sent) <= 40
        if expected:
            assert sent == expected


# -- parser ----------------------------------------------------------------------------------


def test_parse_text_with_usage_in_the_last_chunk() -> None:
    events = parse_all(OpenAICompletionsParser(MODEL), recording("openai_completions_text.sse"))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == (TextContent(text="Hello, world! Ünïcödé ✓"),)
    assert message.stop_reason == "stop"
    assert (message.response_id, message.response_model) == ("chatcmpl-9x1", "gpt-4o-2024-08-06")
    usage = message.usage
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (200, 1000, 9, 1209)
    assert math.isclose(usage.cost.total, (200 * 2 + 1000 * 0.5 + 9 * 10) / 1e6)


def _chunk_stream(*chunks: dict[str, Any]) -> bytes:
    lines = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


def _text_chunk(text: str, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}], **fields}


def test_response_model_only_when_the_server_names_another_model() -> None:
    # pi keeps the first chunk id, and the model only when it differs from the one asked for,
    # from whichever chunk first names such a model.
    echoed = _chunk_stream(
        _text_chunk("a", id="c-1", model=MODEL.id),
        _text_chunk("b", id="c-2", model=MODEL.id),
    )
    message = final(parse_all(OpenAICompletionsParser(MODEL), echoed))
    assert (message.response_id, message.response_model) == ("c-1", None)
    late = _chunk_stream(
        _text_chunk("a", model=MODEL.id),
        _text_chunk("b", id="c-2", model=""),
        _text_chunk("c", id="c-3", model="served-elsewhere"),
        _text_chunk("d", id="c-4", model="third"),
    )
    message = final(parse_all(OpenAICompletionsParser(MODEL), late))
    assert (message.response_id, message.response_model) == ("c-2", "served-elsewhere")
    assert message.content == (TextContent(text="abcd"),)


def test_assistant_message_keys_in_the_order_pi_writes_them() -> None:
    message = final(
        parse_all(OpenAICompletionsParser(MODEL), recording("openai_completions_text.sse"))
    )
    keys = list(to_json(message))
    assert keys == [
        "role",
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stopReason",
        "timestamp",
        "responseId",
        "responseModel",
        "rawStopReason",  # pi 1.6.0: the server's finish_reason, learnt last
    ]
    assert message.raw_stop_reason == "stop"
    assert message.usage.reasoning == 0  # pi 1.6.0 always writes it for this API
    assert message.usage.cost.total_from_provider is False


def test_parse_reasoning_content() -> None:
    events = parse_all(OpenAICompletionsParser(MODEL), recording("openai_completions_thinking.sse"))
    # As pi: every block stays open until the response ends, then all end in content order.
    assert kinds(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "text_start",
        "text_delta",
        "thinking_end",
        "text_end",
        "done",
    ]
    message = final(events)
    assert message.content == (
        ThinkingContent(
            thinking="Let me think about this.", thinking_signature="reasoning_content"
        ),
        TextContent(text="The answer is 42."),
    )
    # DeepSeek's prompt_cache_hit_tokens count as cache reads.
    assert (message.usage.input, message.usage.cache_read, message.usage.output) == (30, 20, 30)


def test_blocks_end_with_the_response_and_alternating_deltas_share_one_block() -> None:
    """pi's order (seen with pi 0.73.1 against the shared mock): a text block stays open
    while a tool call streams and ends just before it; text after reasoning after text goes
    on in the first text block; content comes before reasoning within one chunk."""
    parser = OpenAICompletionsParser(MODEL)
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Let me "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]},
        {"choices": [{"index": 0, "delta": {"content": "run it.", "reasoning_content": "!"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {"name": "bash", "arguments": '{"command"'},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ': "ls"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        },
    ]
    events = [e for c in chunks for e in parser.feed("message", json.dumps(c))]
    events += parser.feed("message", "[DONE]")
    assert [(e.type, getattr(e, "content_index", None)) for e in events] == [
        ("start", None),
        ("text_start", 0),
        ("text_delta", 0),
        ("thinking_start", 1),
        ("thinking_delta", 1),
        ("text_delta", 0),
        ("thinking_delta", 1),
        ("toolcall_start", 2),
        ("toolcall_delta", 2),
        ("toolcall_delta", 2),
        ("text_end", 0),
        ("thinking_end", 1),
        ("toolcall_end", 2),
        ("done", None),
    ]
    message = final(events)
    assert message.content[:2] == (
        TextContent(text="Let me run it."),
        ThinkingContent(thinking="hmm!", thinking_signature="reasoning_content"),
    )


def test_parse_parallel_tool_calls_with_split_arguments() -> None:
    events = parse_all(OpenAICompletionsParser(MODEL), recording("openai_completions_tools.sse"))
    message = final(events)
    assert message.stop_reason == "toolUse"
    assert message.content == (
        TextContent(text="Checking."),
        ToolCall(
            id="call_Xa1",
            name="read",
            arguments={"path": "src/main.py", "note": 'café "quoted"'},
        ),
        ToolCall(id="call_Yb2", name="bash", arguments={"command": "ls -la | grep 'π'"}),
    )
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert "".join(d.delta for d in deltas if d.content_index == 1) == (
        '{"path": "src/main.py", "note": "caf\\u00e9 \\"quoted\\""}'
    )
    # Partials show {} until the arguments parse; then the parsed value.
    assert deltas[0].partial.content[1].arguments == {}  # type: ignore[union-attr]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [e.content_index for e in ends] == [1, 2]


def test_every_tool_call_piece_is_a_delta_even_without_argument_text() -> None:
    # A server's first piece of a call often names it with no (or "") argument text; pi
    # still reports a toolcall_delta for it, with delta "".
    def piece(**function: Any) -> dict[str, Any]:
        call = {"index": 0, "function": function}
        if "name" in function:
            call["id"] = "call_1"
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    body = _chunk_stream(
        piece(name="bash"),
        piece(arguments=""),
        piece(arguments='{"command": "ls"}'),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    events = parse_all(OpenAICompletionsParser(MODEL), body)
    assert [e.type for e in events] == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    deltas = [e.delta for e in events if isinstance(e, ToolCallDelta)]
    assert deltas == ["", "", '{"command": "ls"}']
    assert final(events).content == (
        ToolCall(id="call_1", name="bash", arguments={"command": "ls"}),
    )


def test_parse_without_done_but_with_finish_reason_completes() -> None:
    raw = recording("openai_completions_text.sse").replace(b"data: [DONE]\n\n", b"")
    message = final(parse_all(OpenAICompletionsParser(MODEL), raw))
    assert message.stop_reason == "stop"
    assert message.usage.output == 9


def test_parse_cut_short_is_an_error_naming_the_problem() -> None:
    raw = recording("openai_completions_text.sse")
    cut = raw[: raw.index(b'"finish_reason":"stop"')].rsplit(b"\n\n", 1)[0] + b"\n\n"
    message = final(parse_all(OpenAICompletionsParser(MODEL), cut))
    assert message.stop_reason == "error"
    assert message.error_message == (
        "The openai-completions stream ended without a finish_reason or [DONE] "
        "(the response was cut short)"
    )
    assert message.content == (TextContent(text="Hello, world! Ünïcödé ✓"),)


def test_parse_finish_reasons() -> None:
    def run(finish: str) -> tuple[str, str | None]:
        parser = OpenAICompletionsParser(MODEL)
        parser.feed("message", '{"choices":[{"index":0,"delta":{"content":"x"}}]}')
        parser.feed(
            "message", f'{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish}"}}]}}'
        )
        message = final(parser.feed("message", "[DONE]"))
        return message.stop_reason, message.error_message

    assert run("length") == ("length", None)
    assert run("stop") == ("stop", None)
    reason, text = run("content_filter")
    assert reason == "error" and "content filter" in (text or "")


def test_parse_error_chunk_and_bad_json() -> None:
    parser = OpenAICompletionsParser(MODEL)
    parser.feed("message", '{"choices":[{"index":0,"delta":{"content":"part"}}]}')
    events = parser.feed(
        "message", '{"error":{"message":"Provider returned error","code":502,"metadata":{}}}'
    )
    message = final(events)
    assert message.error_message == "Provider returned error"  # the SDK's text: no status
    assert message.content == (TextContent(text="part"),)
    assert parser.feed("message", '{"choices":[]}') == []  # nothing after the end

    broken = OpenAICompletionsParser(MODEL)
    message = final(broken.feed("message", "{not json"))
    assert message.error_message == (
        "Malformed openai-completions stream: invalid JSON in a 'message' event: '{not json'"
    )


# -- over HTTP -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai_completions_text.sse", "openai_completions_tools.sse"])
async def test_streams_over_http(server: LoopbackServer, pool: HttpPool, name: str) -> None:
    body = recording(name)
    server.push(sse(body, chunk_size=7))
    model = make_model(API, server.base_url)
    events = await collect(make_provider(API, pool), model)
    expected = parse_all(OpenAICompletionsParser(model), body)
    assert kinds(events) == kinds(expected)
    got, want = final(events), final(expected)
    assert (got.content, got.usage, got.stop_reason) == (want.content, want.usage, want.stop_reason)
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/chat/completions")
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["accept"] == "text/event-stream"
    assert request.json()["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}],
    }
    assert sum(isinstance(e, TextDelta) for e in events) == sum(
        isinstance(e, TextDelta) for e in expected
    )


def _count_feeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of SSE events of each ``feed_all`` call from now on, in order."""
    parts: list[int] = []
    original = OpenAICompletionsParser.feed_all

    def feed_all(self: OpenAICompletionsParser, decoded: list[tuple[str, str]]) -> Any:
        parts.append(len(decoded))
        return original(self, decoded)

    monkeypatch.setattr(OpenAICompletionsParser, "feed_all", feed_all)
    return parts


def _long_body() -> bytes:
    """A reply of 300 templated deltas, its finish and its usage: more than one hand-over."""

    def data(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    def delta(text: str, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
        return data({"id": "c1", "model": "m", "choices": [choice]})

    body = b"".join(delta(f"t{i} ") for i in range(300)) + delta("", "stop")
    return (
        body
        + data({"id": "c1", "choices": [], "usage": {"prompt_tokens": 3}})
        + b"data: [DONE]\n\n"
    )


async def test_a_long_read_is_handed_over_a_slice_at_a_time(
    server: LoopbackServer, pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of hundreds of SSE events is parsed and handed over HANDOVER events at a time
    (its first deltas are not held while the rest is parsed, issue 38); the events are the
    whole parse's, the final one last."""
    body = _long_body()
    server.push(sse(body))  # one write: the client's first read holds most of it
    parts = _count_feeds(monkeypatch)
    model = make_model(API, server.base_url)
    events = await collect(make_provider(API, pool), model)
    expected = parse_all(OpenAICompletionsParser(model), body)
    assert [(e.type, getattr(e, "delta", None)) for e in events] == [
        (e.type, getattr(e, "delta", None)) for e in expected
    ]
    got, want = final(events), final(expected)
    assert (got.content, got.usage, got.stop_reason) == (want.content, want.usage, want.stop_reason)
    assert max(parts) == HANDOVER and sum(parts) == 303


class RunTaker:
    """A sender that takes runs of deltas whole (as the agent loop's intake does)."""

    takes_runs = True

    def __init__(self, channel: trio.MemorySendChannel[Any]) -> None:
        self.channel = channel

    def send_nowait(self, item: Any) -> None:
        self.channel.send_nowait(item)

    async def send(self, item: Any) -> None:
        await self.channel.send(item)


async def test_a_long_read_goes_as_runs_and_its_first_run_before_the_rest_is_parsed(
    server: LoopbackServer, pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """To a sender that takes runs, a long read's templated deltas go as DeltaRun items
    (issue 38) that expand into the whole parse's events; a slice's run is seen by the
    consumer before the next slice is parsed (the first delta is not held while the rest of
    the read is parsed, as a full channel of single deltas made it)."""
    body = _long_body()
    server.push(sse(body))  # one write: the client's first read holds most of it
    parts = _count_feeds(monkeypatch)
    model = make_model(API, server.base_url)
    send, receive = trio.open_memory_channel[Any](math.inf)
    items: list[Any] = []
    slices_at_first_run: list[int] = []

    def take(item: Any) -> None:
        if isinstance(item, DeltaRun) and not slices_at_first_run:
            slices_at_first_run.append(len(parts))
        items.append(item)

    async def consume() -> None:
        # As the agent loop takes its channel: what is queued at each wake-up, at once.
        async for item in receive:
            take(item)
            while True:
                try:
                    take(receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with send:
            await make_provider(API, pool).stream(model, CONTEXT, StreamOptions(), RunTaker(send))
    runs = [item for item in items if isinstance(item, DeltaRun)]
    assert len(runs) >= 4 and sum(map(len, runs)) >= 290
    events = expand_events(items)
    expected = parse_all(OpenAICompletionsParser(model), body)

    def shown(e: Any) -> tuple[Any, ...]:  # the builders' timestamps differ
        partial = getattr(e, "partial", None)
        return (e.type, getattr(e, "delta", None), partial and to_json(partial.content))

    assert [shown(e) for e in events] == [shown(e) for e in expected]
    assert final(events).content == final(expected).content
    assert max(parts) == HANDOVER
    assert slices_at_first_run and slices_at_first_run[0] <= 2, (parts, slices_at_first_run)


@pytest.mark.parametrize("segment", [None, 64])
def test_a_growing_transcript_is_encoded_incrementally_and_exactly(
    segment: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With small segments the body comes in pieces (the frozen segments as they are kept).
    import orjson

    from pitrio.actors.model_router.providers import convert
    from pitrio.actors.model_router.providers import openai_completions_request as module

    if segment is not None:
        monkeypatch.setattr(convert, "SEGMENT_BYTES", segment)

    image = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="call_1", name="read", arguments={"path": "a"})
    image_result = tool_result("call_1", "").__class__(
        tool_call_id="call_1", tool_name="read", content=(image,), is_error=False, timestamp=3
    )
    steps = [
        user_message("one"),
        assistant(TextContent(text="first"), api=API),
        user_message("two"),
        assistant(call, api=API, stop_reason="toolUse"),  # its result comes a step later
        image_result,
        assistant(ThinkingContent(thinking="hm"), TextContent(text="x"), api="elsewhere"),
        user_message("three"),
    ]
    messages: list[Any] = []
    for step in steps:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))
        plain = orjson.dumps(build_body(MODEL, context, StreamOptions()))
        request = build_request(MODEL, context, StreamOptions(), api_key=None, headers={})
        assert request.content() == plain, f"after {len(messages)} messages"
        assert isinstance(request.body, tuple) == (segment is not None and len(messages) > 1)
    # The state after the last request is kept, holding the whole transcript.
    (source, _), *_ = [
        (src, b) for src, b in module._PREFIXES.states() if src and src[0] is steps[0]
    ]
    assert list(source) == messages
    # A transcript that is not an extension (an edited middle) is rebuilt, still exactly.
    edited = [*messages[:1], user_message("edited"), *messages[2:]]
    context = LlmContext(system_prompt="sys", messages=tuple(edited))
    assert build_request(
        MODEL, context, StreamOptions(), api_key=None, headers={}
    ).content() == orjson.dumps(build_body(MODEL, context, StreamOptions()))


def test_a_cached_transcript_is_rebuilt_for_a_model_that_converts_it_differently() -> None:
    # The kept state of a transcript is the conversion for one model configuration: a model
    # with the same provider, API, id and base URL but other compat flags or input kinds
    # (models.json edited and reloaded mid-session) converts earlier messages differently, so
    # each request alternating between such models must still match the plain body.
    import orjson

    call = ToolCall(id="call.with.a-long:id/0123456789", name="read", arguments={"path": "a"})
    image = ImageContent(data="AAAA", mime_type="image/png")
    result = tool_result(call.id, "").__class__(
        tool_call_id=call.id, tool_name="read", content=(image,), is_error=False, timestamp=3
    )
    steps = [
        user_message("one"),
        assistant(ThinkingContent(thinking="why"), TextContent(text="first"), api=API),
        assistant(call, api=API, stop_reason="toolUse"),
        result,
        user_message("two"),
        assistant(TextContent(text="second"), api=API),
        user_message("three"),
    ]
    variants = [
        make_model(API),
        make_model(API, compat={"requiresThinkingAsText": True}),
        make_model(API, compat={"requiresToolResultName": True}),
        make_model(API, compat={"requiresAssistantAfterToolResult": True}),
        make_model(API, compat={"requiresMistralToolIds": True}),
        make_model(API, image=False),
        make_model(API, reasoning=True),
    ]
    messages: list[Any] = []
    for step in steps:
        messages.append(step)
        context = LlmContext(system_prompt="sys", messages=tuple(messages))
        for model in [*variants, *reversed(variants)]:
            plain = orjson.dumps(build_body(model, context, StreamOptions()))
            request = build_request(model, context, StreamOptions(), api_key=None, headers={})
            assert request.content() == plain, f"{model.compat}, {model.input}: {len(messages)}"


def test_user_content_string_stays_a_string_blocks_become_parts() -> None:
    # pi: a string content is sent as it is; blocks (text only too) as one part each, never
    # joined; a user message with no blocks is left out.
    from pitrio.messages.agent import UserMessage

    context = LlmContext(
        system_prompt="",
        messages=(
            UserMessage(content="plain", timestamp=1),
            UserMessage(content=(TextContent(text="a"), TextContent(text="b")), timestamp=2),
            UserMessage(content=(), timestamp=3),
        ),
    )
    plain = build_body(MODEL, context, StreamOptions())["messages"]
    sent = build_request(MODEL, context, StreamOptions(), api_key=None, headers={}).json()
    for messages in (plain, sent["messages"]):
        assert messages == [
            {"role": "user", "content": "plain"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ]
