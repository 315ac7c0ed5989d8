"""Helpers shared by the provider tests: models, contexts, a tiny SSE splitter, collectors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import trio

from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.anthropic import AnthropicProvider
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool, HttpProvider, SseParser
from pitrio.actors.model_router.providers.openai_completions import OpenAICompletionsProvider
from pitrio.actors.model_router.providers.openai_responses import OpenAIResponsesProvider
from pitrio.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    user_message,
)
from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions, ToolSpec
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError

SECRET = "sk-test-0123456789abcdef"
"""The API key every test provider is configured with (it must never leak)."""

APIS = ("openai-completions", "openai-responses", "anthropic-messages")

PROVIDERS: dict[str, type[HttpProvider]] = {
    "openai-completions": OpenAICompletionsProvider,
    "openai-responses": OpenAIResponsesProvider,
    "anthropic-messages": AnthropicProvider,
}


def make_model(
    api: str,
    base_url: str = "http://127.0.0.1:9",
    *,
    provider: str = "test",
    id: str = "test-model",
    reasoning: bool = False,
    image: bool = True,
    compat: Any = None,
    levels: dict[str, str | None] | None = None,
    max_tokens: int = 16384,
) -> Model:
    """A model of ``api`` served at ``base_url``, priced so costs are easy to check."""
    return Model(
        id=id,
        name=id,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        thinking_level_map=levels,
        input=("text", "image") if image else ("text",),
        cost=ModelCost(input=2, output=10, cache_read=0.5, cache_write=2.5),
        context_window=200000,
        max_tokens=max_tokens,
        compat=compat,
    )


def credentials(key: str | None = SECRET, **kwargs: Any) -> Credentials:
    """Credentials holding ``key`` for provider ``test`` (as a models.json key)."""
    keys = {"test": key} if key is not None else {}
    return Credentials(auth_path=None, env={}, provider_keys=keys, **kwargs)


def make_provider(
    api: str,
    pool: HttpPool,
    creds: Credentials | None = None,
    settings: ProviderSettings | None = None,
) -> HttpProvider:
    """The provider of ``api`` over ``pool``."""
    return PROVIDERS[api](pool, creds or credentials(), settings)


TOOLS = (
    ToolSpec(
        name="read",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    ToolSpec(
        name="bash",
        description="Run a command",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}},
    ),
)

CONTEXT = LlmContext(
    system_prompt="You are terse.",
    messages=(user_message("hello", timestamp=1),),
    tools=TOOLS,
)


def assistant(
    *blocks: Any,
    api: str = "openai-completions",
    provider: str = "test",
    model: str = "test-model",
    stop_reason: Any = "stop",
) -> AssistantMessage:
    """An assistant message as a previous turn of a transcript."""
    return AssistantMessage(
        content=tuple(blocks),
        api=api,
        provider=provider,
        model=model,
        usage=Usage(),
        stop_reason=stop_reason,
        timestamp=2,
    )


def tool_result(
    call_id: str, text: str, name: str = "read", *, error: bool = False
) -> ToolResultMessage:
    """A tool result message."""
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=name,
        content=(TextContent(text=text),),
        is_error=error,
        timestamp=3,
    )


def tool_turn(api: str) -> LlmContext:
    """A transcript with one tool round trip made by the test model of ``api``."""
    call = ToolCall(id="call_1|fc_1" if api == "openai-responses" else "call_1", name="read",
                    arguments={"path": "a.txt"})  # fmt: skip
    return LlmContext(
        system_prompt="sys",
        messages=(
            user_message("read a.txt", timestamp=1),
            assistant(TextContent(text="Reading."), call, api=api, stop_reason="toolUse"),
            tool_result(call.id, "contents of a"),
        ),
        tools=TOOLS,
    )


def split_sse(raw: bytes) -> list[tuple[str, str]]:
    """``(event, data)`` pairs of an SSE body (enough of the format for the recordings)."""
    events: list[tuple[str, str]] = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            events.append((name, "\n".join(data)))
    return events


def parse_all(parser: SseParser, raw: bytes) -> list[AssistantMessageEvent]:
    """Feed a whole recorded body to ``parser`` (then the end of the body)."""
    out: list[AssistantMessageEvent] = []
    for name, data in split_sse(raw):
        out.extend(parser.feed(name, data))
    out.extend(parser.end())
    return out


async def collect(
    provider: HttpProvider,
    model: Model,
    context: LlmContext = CONTEXT,
    options: StreamOptions | None = None,
) -> list[AssistantMessageEvent]:
    """Every event of one streamed response."""
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    async with send:
        await provider.stream(model, context, options or StreamOptions(), send)
    return [event async for event in receive]


def final(events: Sequence[AssistantMessageEvent]) -> AssistantMessage:
    """The final message of a stream (asserting it ended with exactly one done/error)."""
    ends = [e for e in events if isinstance(e, StreamDone | StreamError)]
    assert len(ends) == 1 and events[-1] is ends[0], [e.type for e in events]
    end = ends[0]
    return end.message if isinstance(end, StreamDone) else end.error


def kinds(events: Sequence[AssistantMessageEvent]) -> list[str]:
    """Event types, consecutive deltas of one kind collapsed to one entry."""
    out: list[str] = []
    for event in events:
        if event.type.endswith("_delta") and out and out[-1] == event.type:
            continue
        out.append(event.type)
    return out
