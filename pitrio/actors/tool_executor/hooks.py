"""The tool-call hooks of a batch (spec §2.9, §2.13): ``before_tool_call``, ``after_tool_call``.

They live here, with the batch that calls them; :mod:`pitrio.actors.agent_loop.hooks`
re-exports them as part of the loop's hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs

from pitrio.messages.agent import AgentMessage, AgentToolResult, AssistantMessage
from pitrio.messages.content import ImageContent, TextContent, ToolCall

ToolExecutionMode = Literal["parallel", "sequential"]


@attrs.frozen(kw_only=True)
class BeforeToolCallContext:
    """What ``before_tool_call`` sees: the response, the call, validated args, the context.

    For a nested call ``tool_call`` is the nested call (its id derived from the parent's) and
    ``assistant_message`` the response that made the outermost call.
    """

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    context: Sequence[AgentMessage]
    """The transcript: an immutable view, whose stored part is decoded where read."""
    parent_tool_call_id: str | None = None
    """Set when another tool (a codemode script) made this call."""


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
    context: Sequence[AgentMessage]
    """The transcript: an immutable view, whose stored part is decoded where read."""
    parent_tool_call_id: str | None = None
    """Set when another tool (a codemode script) made this call."""


@attrs.frozen(kw_only=True)
class AfterToolCallResult:
    """Overrides of a tool result; each field given replaces the original wholesale."""

    content: tuple[TextContent | ImageContent, ...] | None = None
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None


BeforeToolCall = Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]]
AfterToolCall = Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]]
