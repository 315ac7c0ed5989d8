"""The faux provider: scripted replies streamed with pi's event protocol."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.model_router.providers.faux import (
    FauxProvider,
    FauxReply,
    FauxToolCall,
    common_prefix_length,
    estimate_usage,
    last_user_text,
    reply_text,
    serialize_request,
    split_chunks,
)
from pitrio.actors.model_router.registry import FAUX_MODELS
from pitrio.actors.model_router.usage import estimate_tokens, js_length, make_usage, with_cost
from pitrio.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    to_json,
    user_message,
)
from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions, ToolSpec
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError
from tests.shared_dir import FIXTURES

FAUX_1 = FAUX_MODELS[0]


def context(*texts: str, system: str = "sys") -> LlmContext:
    return LlmContext(
        system_prompt=system, messages=tuple(user_message(t, timestamp=1) for t in texts)
    )


async def run(
    faux: FauxProvider,
    ctx: LlmContext | None = None,
    options: StreamOptions | None = None,
    model: Model = FAUX_1,
) -> list[AssistantMessageEvent]:
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    await faux.stream(model, ctx or context("hi"), options or StreamOptions(), send)
    send.close()
    return [event async for event in receive]


def kinds(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, StreamDone | StreamError)
    return last.message if isinstance(last, StreamDone) else last.error


# -- pure helpers ----------------------------------------------------------------------------


def test_split_chunks() -> None:
    assert split_chunks("abcdefghijklmnopqrstuvwxyz") == ["abcdefghijkl", "mnopqrstuvwx", "yz"]
    assert split_chunks("abc", 1) == ["a", "b", "c"]
    assert split_chunks("") == [""]


def test_token_estimates_count_like_javascript() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert js_length("é") == 1
    assert js_length("😀") == 2  # a surrogate pair in UTF-16


def test_reply_text_matches_recorded_output_tokens() -> None:
    """Output tokens of three recorded replies (prompt_tool_call / thinking_stream)."""
    step: list[TextContent | ThinkingContent | ToolCall] = [
        TextContent(text="Step 1/2: read."),
        ToolCall(id="call_1", name="read", arguments={"path": "notes.txt"}),
    ]
    assert reply_text(step) == 'Step 1/2: read.\nread:{"path":"notes.txt"}'
    assert estimate_tokens(reply_text(step)) == 11
    think: list[TextContent | ThinkingContent | ToolCall] = [
        ThinkingContent(
            thinking="The user asked: THINK: how should I name this function?. "
            "Consider it step by step."
        ),
        TextContent(text="Here is my considered answer."),
    ]
    assert estimate_tokens(reply_text(think)) == 28
    bash: list[TextContent | ThinkingContent | ToolCall] = [
        TextContent(text="Step 2/2: bash."),
        ToolCall(id="call_2", name="bash", arguments={"command": "ls"}),
    ]
    assert estimate_tokens(reply_text(bash)) == 10


def test_serialize_request() -> None:
    ctx = LlmContext(
        system_prompt="You are helpful.",
        messages=(
            UserMessage(
                content=(
                    TextContent(text="look"),
                    ImageContent(data="AAAA", mime_type="image/png"),
                ),
                timestamp=1,
            ),
            AssistantMessage(
                content=(TextContent(text="ok"), ToolCall(id="c", name="read", arguments={"p": 1})),
                api="a",
                provider="p",
                model="m",
                usage=Usage(),
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(
                tool_call_id="c",
                tool_name="read",
                content=(TextContent(text="data"),),
                is_error=False,
                timestamp=3,
            ),
            UserMessage(content="plain", timestamp=4),
        ),
        tools=(ToolSpec(name="read", description="Read", parameters={"type": "object"}),),
    )
    assert serialize_request(ctx) == (
        "system:You are helpful.\n\n"
        "user:look\n[image:image/png:4]\n\n"
        'assistant:ok\nread:{"p":1}\n\n'
        "toolResult:read\ndata\n\n"
        "user:plain\n\n"
        'tools:[{"name":"read","description":"Read","parameters":{"type":"object"}}]'
    )
    assert serialize_request(LlmContext(system_prompt="", messages=())) == ""


def test_common_prefix_length() -> None:
    assert common_prefix_length("abcdef", "abcxyz") == 3
    assert common_prefix_length("abc", "abc") == 3
    assert common_prefix_length("abc", "abcd") == 3
    assert common_prefix_length("", "abc") == 0
    assert common_prefix_length("x" * 10_000 + "a", "x" * 10_000 + "b") == 10_000


def test_estimate_usage_with_and_without_cache() -> None:
    prompt = "p" * 400  # 100 tokens
    assert estimate_usage(prompt, "o" * 8, None, cached=False) == make_usage(input=100, output=2)
    first = estimate_usage(prompt, "", None, cached=True)
    assert first == make_usage(input=100, cache_write=100)
    assert first.total_tokens == 200  # pi counts the written prompt twice in totalTokens
    # Same request again (a retry): everything comes from the cache.
    again = estimate_usage(prompt, "", prompt, cached=True)
    assert again == make_usage(input=0, cache_read=100)
    # A longer request sharing 400 characters: 100 read, the rest written.
    longer = estimate_usage(prompt + "q" * 41, "", prompt, cached=True)
    assert (longer.input, longer.cache_read, longer.cache_write) == (11, 100, 11)


def test_with_cost_uses_prices_per_million() -> None:
    model = Model(
        id="m",
        name="m",
        api="a",
        provider="p",
        base_url="",
        reasoning=False,
        input=("text",),
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        context_window=1,
        max_tokens=1,
    )
    usage = with_cost(make_usage(input=1_000_000, output=2_000_000, cache_read=10), model)
    assert usage.cost.input == 3
    assert usage.cost.output == 30
    assert usage.cost.cache_read == pytest.approx(0.000003)
    assert usage.cost.total == pytest.approx(33.000003)


def test_last_user_text() -> None:
    assert last_user_text(context("one", "two")) == "two"
    assert last_user_text(LlmContext(system_prompt="", messages=())) == ""


def test_reply_validation() -> None:
    with pytest.raises(ValueError, match="cannot stop"):
        FauxReply(error="x", stop_reason="stop")
    with pytest.raises(ValueError):
        FauxReply(text="x", chunk_size=0)
    assert FauxReply(stop_reason="aborted").error_message == "Request was aborted"
    assert FauxReply(stop_reason="error").error_message == "Scripted faux error"
    assert FauxReply(text="x").error_message is None
    assert FauxReply(tool_calls=[FauxToolCall("read")]).final_stop_reason == "toolUse"


# -- streaming -------------------------------------------------------------------------------


async def test_text_reply() -> None:
    faux = FauxProvider([FauxReply(text="Hello there, how are you?")])
    events = await run(faux)
    assert kinds(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    deltas = [e.delta for e in events if e.type == "text_delta"]
    assert deltas == ["Hello there,", " how are you", "?"]
    message = final(events)
    assert message.content == (TextContent(text="Hello there, how are you?"),)
    assert message.stop_reason == "stop"
    assert (message.api, message.provider, message.model) == ("faux-api", "faux", "faux-1")
    assert faux.pending == 0


async def test_plain_string_and_script_steps() -> None:
    seen: list[LlmContext] = []

    def script(ctx: LlmContext) -> FauxReply:
        seen.append(ctx)
        return FauxReply(text=f"dynamic: {last_user_text(ctx)}")

    faux = FauxProvider(["plain", script, lambda ctx: "from lambda"])
    assert final(await run(faux)).content == (TextContent(text="plain"),)
    ctx = context("question")
    assert final(await run(faux, ctx)).content == (TextContent(text="dynamic: question"),)
    assert seen == [ctx]
    assert final(await run(faux)).content == (TextContent(text="from lambda"),)


async def test_thinking_and_text_reply() -> None:
    faux = FauxProvider([FauxReply(thinking="Reasoning here", text="Answer")])
    events = await run(faux)
    assert kinds(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [getattr(e, "content_index", None) for e in events[1:-1]] == [0] * 4 + [1] * 3
    assert final(events).content == (
        ThinkingContent(thinking="Reasoning here"),
        TextContent(text="Answer"),
    )


async def test_tool_call_reply_ids_and_json_chunks() -> None:
    faux = FauxProvider(
        [
            FauxReply(
                text="Two tools.",
                tool_calls=(
                    FauxToolCall("read", {"path": "notes.txt"}),
                    FauxToolCall("bash", {"command": "ls"}, id="mine"),
                ),
            ),
            FauxReply(tool_calls=(FauxToolCall("read", {}),)),
        ]
    )
    events = await run(faux)
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]
    assert deltas == ['{"path":"not', 'es.txt"}', '{"command":"', 'ls"}']
    message = final(events)
    assert message.stop_reason == "toolUse"
    assert events[-1].reason == "toolUse"  # type: ignore[union-attr]
    assert message.tool_calls == (
        ToolCall(id="call_1", name="read", arguments={"path": "notes.txt"}),
        ToolCall(id="mine", name="bash", arguments={"command": "ls"}),
    )
    # Ids count per provider, across requests.
    assert final(await run(faux)).tool_calls[0].id == "call_2"


async def test_error_reply() -> None:
    faux = FauxProvider([FauxReply(error="503 Service Unavailable (scripted)")])
    events = await run(faux)
    assert kinds(events) == ["start", "error"]
    # Like pi 1.6.0's faux, every partial says "pending" and already carries the message
    # (0.73.1's partials carried the final stop reason).
    assert events[0].partial.stop_reason == "pending"  # type: ignore[union-attr]
    assert events[0].partial.error_message == "503 Service Unavailable (scripted)"  # type: ignore[union-attr]
    error = events[-1]
    assert isinstance(error, StreamError)
    assert error.reason == "error"
    assert error.error.stop_reason == "error"
    assert error.error.error_message == "503 Service Unavailable (scripted)"
    assert error.error.content == ()


async def test_error_after_partial_text_and_aborted_reply() -> None:
    faux = FauxProvider(
        [
            FauxReply(text="half an answer", error="connection reset"),
            FauxReply(text="cut", stop_reason="aborted"),
        ]
    )
    events = await run(faux)
    assert kinds(events)[-2:] == ["text_end", "error"]
    assert final(events).content == (TextContent(text="half an answer"),)
    events = await run(faux)
    assert events[-1].reason == "aborted"  # type: ignore[union-attr]
    assert final(events).error_message == "Request was aborted"


async def test_length_stop_reason() -> None:
    events = await run(FauxProvider([FauxReply(text="trunc", stop_reason="length")]))
    assert events[-1].reason == "length"  # type: ignore[union-attr]


async def test_failing_script_becomes_error_event() -> None:
    def broken(ctx: LlmContext) -> FauxReply:
        raise RuntimeError("script exploded")

    events = await run(FauxProvider([broken]))
    assert kinds(events) == ["error"]
    assert final(events).error_message == "script exploded"


async def test_echo_with_empty_queue() -> None:
    faux = FauxProvider()
    events = await run(faux, context("first", "echo me please"))
    assert final(events).content == (TextContent(text="echo me please"),)
    assert kinds(events)[0] == "start"


async def test_default_script_when_queue_is_empty() -> None:
    faux = FauxProvider(["queued"], default=lambda ctx: "default")
    assert final(await run(faux)).content == (TextContent(text="queued"),)
    assert final(await run(faux)).content == (TextContent(text="default"),)
    assert final(await run(faux)).content == (TextContent(text="default"),)


async def test_queue_management() -> None:
    faux = FauxProvider()
    faux.push("a", "b")
    assert faux.pending == 2
    faux.set_replies(["c"])
    assert faux.pending == 1
    assert final(await run(faux)).content == (TextContent(text="c"),)


async def test_records_requests() -> None:
    faux = FauxProvider(["x", "y"])
    ctx = context("hello")
    options = StreamOptions(session_id="s-1", reasoning="high")
    await run(faux, ctx, options, model=FAUX_MODELS[1])
    await run(faux)
    assert len(faux.requests) == 2
    first = faux.requests[0]
    assert first.model is FAUX_MODELS[1]
    assert first.context is ctx
    assert first.options.session_id == "s-1"
    assert first.options.reasoning == "high"
    assert faux.last_request is faux.requests[1]


async def test_usage_estimates_and_cache_per_session() -> None:
    faux = FauxProvider(["four", "four", "four"])
    ctx = context("hello", system="s" * 40)
    events = await run(faux, ctx, StreamOptions(session_id="a"))
    prompt_tokens = estimate_tokens(serialize_request(ctx))
    usage = final(events).usage
    assert usage == make_usage(input=prompt_tokens, output=1, cache_write=prompt_tokens)
    # Every partial carries the estimate already, as pi's faux does.
    assert all(e.partial.usage == usage for e in events if hasattr(e, "partial"))
    # The identical request in the same session reads everything from the cache.
    usage = final(await run(faux, ctx, StreamOptions(session_id="a"))).usage
    assert (usage.input, usage.cache_read, usage.cache_write) == (0, prompt_tokens, 0)
    # No session id: no cache simulation.
    usage = final(await run(faux, ctx)).usage
    assert (usage.input, usage.cache_read, usage.cache_write) == (prompt_tokens, 0, 0)


async def test_cache_keeps_the_most_recently_used_sessions_only() -> None:
    faux = FauxProvider(default=lambda _context: "four", cached_sessions=2)
    ctx = context("hello", system="s" * 40)
    prompt_tokens = estimate_tokens(serialize_request(ctx))

    async def usage_of(session_id: str) -> tuple[int, int, int]:
        usage = final(await run(faux, ctx, StreamOptions(session_id=session_id))).usage
        return (usage.input, usage.cache_read, usage.cache_write)

    written = (prompt_tokens, 0, prompt_tokens)
    read = (0, prompt_tokens, 0)
    assert await usage_of("a") == written
    assert await usage_of("b") == written
    assert await usage_of("a") == read  # a is now the most recent, b the oldest
    assert await usage_of("c") == written  # c pushes b out, not a
    assert await usage_of("a") == read
    assert await usage_of("b") == written  # forgotten: written again, as after an expiry
    assert len(faux._prompt_cache) == 2
    with pytest.raises(ValueError, match="cached_sessions"):
        FauxProvider(cached_sessions=0)


async def test_explicit_usage_wins() -> None:
    usage = make_usage(input=1, output=2)
    faux = FauxProvider([FauxReply(text="x", usage=usage)])
    assert final(await run(faux, options=StreamOptions(session_id="s"))).usage == usage


async def test_chunk_size_override() -> None:
    faux = FauxProvider([FauxReply(text="abcdef", chunk_size=2)], chunk_size=4)
    deltas = [e.delta for e in await run(faux) if e.type == "text_delta"]
    assert deltas == ["ab", "cd", "ef"]


# -- timing and cancellation -----------------------------------------------------------------


async def test_delay_per_chunk(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider([FauxReply(text="a" * 30, chunk_delay=0.5), "b" * 30], chunk_delay=0.25)
    start = trio.current_time()
    await run(faux)
    assert trio.current_time() - start == pytest.approx(1.5)  # three chunks
    start = trio.current_time()
    await run(faux)
    assert trio.current_time() - start == pytest.approx(0.75)  # the provider's default


async def test_tokens_per_second_pacing(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider(["a" * 30], tokens_per_second=200)
    start = trio.current_time()
    await run(faux)
    # 12 + 12 + 6 characters = 3 + 3 + 2 tokens at 200 tokens/s.
    assert trio.current_time() - start == pytest.approx(0.040)


async def test_delays_are_paced_between_events(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider([FauxReply(text="x" * 24, chunk_delay=1.0)])
    send, receive = trio.open_memory_channel[AssistantMessageEvent](0)
    stamped: list[tuple[str, float]] = []
    async with trio.open_nursery() as nursery:

        async def produce() -> None:
            async with send:
                await faux.stream(FAUX_1, context("hi"), StreamOptions(), send)

        nursery.start_soon(produce)
        async for event in receive:
            stamped.append((event.type, trio.current_time()))
    t0 = stamped[0][1]
    assert [(kind, round(t - t0, 6)) for kind, t in stamped] == [
        ("start", 0.0),
        ("text_start", 0.0),
        ("text_delta", 1.0),
        ("text_delta", 2.0),
        ("text_end", 2.0),
        ("done", 2.0),
    ]


async def test_cancellation_mid_stream_stops_it(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider([FauxReply(text="word " * 100, chunk_delay=0.015)])
    send, receive = trio.open_memory_channel[AssistantMessageEvent](0)
    seen: list[AssistantMessageEvent] = []
    finished = False
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def produce() -> None:
            nonlocal finished
            async with send:
                with scope:
                    await faux.stream(FAUX_1, context("hi"), StreamOptions(), send)
                    finished = True

        nursery.start_soon(produce)
        async for event in receive:
            seen.append(event)
            if event.type == "text_delta" and len(seen) == 5:
                scope.cancel()
    assert scope.cancelled_caught
    assert not finished
    assert kinds(seen) == ["start", "text_start", "text_delta", "text_delta", "text_delta"]


async def test_cancellation_without_delay(autojump_clock: trio.testing.MockClock) -> None:
    """Even with no delay, every chunk is a checkpoint, so a cancelled scope stops it."""
    faux = FauxProvider(["z" * 1200])
    send, _receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    with trio.CancelScope() as scope:
        scope.cancel()
        await faux.stream(FAUX_1, context("hi"), StreamOptions(), send)
    assert scope.cancelled_caught
    assert _receive.statistics().current_buffer_used == 0


# -- agreement with the recorded fixtures ----------------------------------------------------


def recorded_updates(scenario: str, message_index: int) -> list[dict[str, Any]]:
    """The assistantMessageEvents of the ``message_index``-th assistant message of a transcript."""
    path = FIXTURES / "transcripts" / f"{scenario}.out.jsonl"
    if not path.exists():
        pytest.skip("fixtures not available")
    groups: list[list[dict[str, Any]]] = []
    for line in path.read_text().splitlines():
        value = json.loads(line)
        if value.get("type") == "message_start" and value["message"]["role"] == "assistant":
            groups.append([])
        elif value.get("type") == "message_update":
            groups[-1].append(value["assistantMessageEvent"])
    return groups[message_index]


def shape(event: AssistantMessageEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    for name in ("content_index", "delta", "content"):
        if hasattr(event, name):
            out[name] = getattr(event, name)
    if hasattr(event, "tool_call"):
        out["tool_call"] = to_json(event.tool_call)
    if hasattr(event, "partial"):
        out["partial"] = [to_json(block) for block in event.partial.content]
    return out


def recorded_shape(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event["type"]}
    for key, name in (
        ("contentIndex", "content_index"),
        ("delta", "delta"),
        ("content", "content"),
    ):
        if key in event:
            out[name] = event[key]
    if "toolCall" in event:
        out["tool_call"] = event["toolCall"]
    out["partial"] = event["partial"]["content"]
    return out


async def test_tool_call_stream_matches_pi() -> None:
    recorded = recorded_updates("prompt_tool_call", 0)
    faux = FauxProvider(
        [
            FauxReply(
                text="Step 1/2: read.", tool_calls=(FauxToolCall("read", {"path": "notes.txt"}),)
            )
        ]
    )
    events = await run(faux)
    ours = [shape(e) for e in events[1:-1]]
    assert ours == [recorded_shape(e) for e in recorded]


async def test_thinking_stream_matches_pi() -> None:
    recorded = recorded_updates("thinking_stream", 0)
    thought = "The user asked: THINK: how should I name this function?. Consider it step by step."
    faux = FauxProvider([FauxReply(thinking=thought, text="Here is my considered answer.")])
    events = await run(faux, model=FAUX_MODELS[1])
    assert [shape(e) for e in events[1:-1]] == [recorded_shape(e) for e in recorded]
