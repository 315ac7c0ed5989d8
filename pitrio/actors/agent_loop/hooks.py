"""Hooks and options of the core loop (spec §2.2, §2.13).

The tool-call hooks (``before_tool_call``, ``after_tool_call``) and their contexts belong to
the tool executor's batch, which calls them; they are re-exported here with the loop's own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import attrs

from pitrio.actors.agent_loop.queues import QueueMode
from pitrio.actors.model_router.provider_hooks import ProviderHooks
from pitrio.actors.tool_executor.hooks import (
    AfterToolCall,
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCall,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolExecutionMode,
)
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    LlmMessage,
    ToolResultMessage,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions

__all__ = [
    "AfterToolCall",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "BeforeToolCall",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ConvertToLlm",
    "GetApiKey",
    "LoopHooks",
    "LoopOptions",
    "OnRequest",
    "ShouldStopAfterTurn",
    "ToolExecutionMode",
    "TransformContext",
    "TurnContext",
]


@attrs.frozen(kw_only=True)
class TurnContext:
    """What ``should_stop_after_turn`` sees at the end of a turn."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: Sequence[AgentMessage]
    """The transcript so far: an immutable view, whose stored part is decoded where read."""
    new_messages: tuple[AgentMessage, ...]


TransformContext = Callable[[list[AgentMessage]], Awaitable[list[AgentMessage]]]
ConvertToLlm = Callable[[Sequence[AgentMessage]], Awaitable[Sequence[LlmMessage]]]
GetApiKey = Callable[[str], Awaitable[str | None]]
OnRequest = Callable[[Model, LlmContext, StreamOptions, Sequence[AgentMessage]], None]
"""Told of each provider request as it goes out: the model, the request, its options and the
transcript it was built from (the session's cache warmer keeps that request's cache warm)."""
ShouldStopAfterTurn = Callable[[TurnContext], Awaitable[bool]]


@attrs.frozen(kw_only=True)
class LoopHooks:
    """The loop's hooks; ``None`` means the default behaviour."""

    transform_context: TransformContext | None = None
    convert_to_llm: ConvertToLlm | None = None
    get_api_key: GetApiKey | None = None
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    should_stop_after_turn: ShouldStopAfterTurn | None = None
    on_request: OnRequest | None = None
    provider: ProviderHooks | None = None
    """Handed to the provider with each request (pi 1.6.0's provider-request hooks)."""
    wants: Callable[[str], bool] | None = None
    """Whether the hook of that name (``transform_context``) has anything to do at this
    request; ``None``: always. A hook that has nothing to do is not called, so the loop does
    not copy the transcript for it (a resumed session's stored part stays undecoded)."""


@attrs.frozen(kw_only=True)
class LoopOptions:
    """Settings of the loop that live outside a run (spec §2.2 defaults)."""

    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    tool_execution: ToolExecutionMode = "parallel"
    session_id: str | None = None
    api_key: str | None = None
    api_key_provider: str | None = None
    """The provider ``api_key`` is for (``--api-key`` is the start model's provider's, as in
    pi); ``None``: every request's."""
