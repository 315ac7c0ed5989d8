"""Messages of an agent transcript (pi's ``AgentMessage``) and what tools return.

The LLM roles (``user``, ``assistant``, ``toolResult``) and the coding-agent roles
(``bashExecution``, ``custom``, ``branchSummary``, ``compactionSummary``) of spec §1.4-§1.5.
Timestamps are Unix milliseconds.
"""

from __future__ import annotations

import time
from typing import Any, Literal, get_args

import attrs

from pitrio.messages.codec import extra_field, reuse_encodings, tag
from pitrio.messages.content import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
THINKING_LEVELS: tuple[ThinkingLevel, ...] = (
    "off",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)


def now_ms() -> int:
    """Wall-clock time in Unix milliseconds, as message timestamps carry it."""
    return time.time_ns() // 1_000_000


@attrs.frozen(kw_only=True)
class Cost:
    """Cost of one response in USD, per usage kind and in total."""

    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    total: float = 0


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts of one response and their cost."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = attrs.field(factory=Cost)

    @property
    def context_tokens(self) -> int:
        """Tokens the response occupied in the context (pi's ``calculateContextTokens``)."""
        if self.total_tokens:
            return self.total_tokens
        return self.input + self.output + self.cache_read + self.cache_write


EMPTY_USAGE = Usage()


@attrs.frozen(kw_only=True)
class Diagnostic:
    """A provider diagnostic attached to an assistant message."""

    type: str
    timestamp: int
    error: dict[str, Any] | None = None
    details: Any = None


@attrs.frozen(kw_only=True)
class UserMessage:
    """A user turn: a string or text/image blocks."""

    role: Literal["user"] = tag("user")
    content: UserContent
    timestamp: int
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """A model response; failures are encoded in ``stop_reason`` and ``error_message``."""

    role: Literal["assistant"] = tag("assistant")
    content: tuple[TextContent | ThinkingContent | ToolCall, ...]
    api: str
    provider: str
    model: str
    usage: Usage
    stop_reason: StopReason
    error_message: str | None = None
    timestamp: int
    # pi's providers add these to a message already made, so its JSON has them last.
    response_id: str | None = None
    response_model: str | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    extra: dict[str, Any] | None = extra_field()

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool-call blocks of this response, in source order."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The result of one tool call; ``details`` is for UIs and logs, never sent to the model."""

    role: Literal["toolResult"] = tag("toolResult")
    tool_call_id: str
    tool_name: str
    content: tuple[TextContent | ImageContent, ...]
    details: Any = None
    is_error: bool
    timestamp: int
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class BashExecutionMessage:
    """A user ``!command`` and its output, shown to the model as a user message."""

    role: Literal["bashExecution"] = tag("bashExecution")
    command: str
    output: str
    exit_code: int | None = None
    cancelled: bool
    truncated: bool
    full_output_path: str | None = None
    timestamp: int
    exclude_from_context: bool | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CustomMessage:
    """An extension-defined message; reaches the model as a user message."""

    role: Literal["custom"] = tag("custom")
    custom_type: str
    content: UserContent
    display: bool
    details: Any = None
    timestamp: int
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class BranchSummaryMessage:
    """The summary of an abandoned branch, synthesized from a ``branch_summary`` entry."""

    role: Literal["branchSummary"] = tag("branchSummary")
    summary: str
    from_id: str
    timestamp: int


@attrs.frozen(kw_only=True)
class CompactionSummaryMessage:
    """The summary of compacted history, synthesized from a ``compaction`` entry."""

    role: Literal["compactionSummary"] = tag("compactionSummary")
    summary: str
    tokens_before: int
    timestamp: int


@attrs.frozen(kw_only=True)
class SystemMessage:
    """A system-prompt update carried in the transcript (the seed's ``system`` role): sent
    at the front of a run when the prompt's sections or the tool set changed since the model
    last saw them, so the original system prompt (and a provider's prompt cache) stays."""

    role: Literal["system"] = tag("system")
    content: str
    timestamp: int
    extra: dict[str, Any] | None = extra_field()


LlmMessage = UserMessage | AssistantMessage | ToolResultMessage
"""What a provider is sent."""

AgentMessage = (
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
    | SystemMessage
)
"""Any message of an agent transcript."""

reuse_encodings(*get_args(AgentMessage))


@attrs.frozen(kw_only=True)
class AgentToolResult:
    """What a tool returns (or streams as a partial result): content, details, terminate."""

    content: tuple[TextContent | ImageContent, ...]
    details: Any = None
    terminate: bool | None = None


def user_message(
    text: str, images: tuple[ImageContent, ...] = (), *, timestamp: int | None = None
) -> UserMessage:
    """Build the user message pi builds for a text prompt: one text block, then the images."""
    return UserMessage(
        content=(TextContent(text=text), *images),
        timestamp=now_ms() if timestamp is None else timestamp,
    )
