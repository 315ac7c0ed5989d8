"""Hooks and options of the core loop (spec §2.2, §2.13)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs

from pitrio.actors.agent_loop.queues import QueueMode
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    LlmMessage,
    ToolResultMessage,
)
from pitrio.messages.content import ImageContent, TextContent, ToolCall


@attrs.frozen(kw_only=True)
class BeforeToolCallContext:
    """What ``before_tool_call`` sees: the response, the call, validated args, the context."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    context: tuple[AgentMessage, ...]


@attrs.frozen(kw_only=True)
class BeforeToolCallResult:
    """``block=True`` refuses the call with ``reason`` (default ``Tool execution was blocked``)."""

    block: bool = False
    reason: str | None = None


@attrs.frozen(kw_only=True)
class AfterToolCallContext:
    """What ``after_tool_call`` sees: the call, its arguments and its result."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    result: AgentToolResult
    is_error: bool
    context: tuple[AgentMessage, ...]


@attrs.frozen(kw_only=True)
class AfterToolCallResult:
    """Overrides of a tool result; each field given replaces the original wholesale."""

    content: tuple[TextContent | ImageContent, ...] | None = None
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None


@attrs.frozen(kw_only=True)
class TurnContext:
    """What ``should_stop_after_turn`` sees at the end of a turn."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: tuple[AgentMessage, ...]
    new_messages: tuple[AgentMessage, ...]


TransformContext = Callable[[list[AgentMessage]], Awaitable[list[AgentMessage]]]
ConvertToLlm = Callable[[Sequence[AgentMessage]], Awaitable[list[LlmMessage]]]
GetApiKey = Callable[[str], Awaitable[str | None]]
BeforeToolCall = Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]]
AfterToolCall = Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]]
ShouldStopAfterTurn = Callable[[TurnContext], Awaitable[bool]]

ToolExecutionMode = Literal["parallel", "sequential"]


@attrs.frozen(kw_only=True)
class LoopHooks:
    """The loop's hooks; ``None`` means the default behaviour."""

    transform_context: TransformContext | None = None
    convert_to_llm: ConvertToLlm | None = None
    get_api_key: GetApiKey | None = None
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    should_stop_after_turn: ShouldStopAfterTurn | None = None


@attrs.frozen(kw_only=True)
class LoopOptions:
    """Settings of the loop that live outside a run (spec §2.2 defaults)."""

    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    tool_execution: ToolExecutionMode = "parallel"
    session_id: str | None = None
    api_key: str | None = None
