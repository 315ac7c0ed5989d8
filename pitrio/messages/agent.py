"""Messages of an agent transcript (pi's ``AgentMessage``) and what tools return.

The LLM roles (``user``, ``assistant``, ``toolResult``) and the coding-agent roles
(``bashExecution``, ``custom``, ``branchSummary``, ``compactionSummary``) of spec §1.4-§1.5.
Timestamps are Unix milliseconds.
"""

from __future__ import annotations

import time
from typing import Any, Literal, get_args

import attrs

from pitrio.messages.codec import Extra, extra_field, opaque_field, reuse_encodings, tag
from pitrio.messages.content import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)

StopReason = Literal["pending", "stop", "length", "toolUse", "error", "aborted", "deferred"]
"""``pending`` marks a partial message while it streams; pi never stores one that says so."""
FinalStopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
"""How a response pitrio produces can end (``deferred`` responses are a provider feature
pitrio does not have)."""
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
    total_from_provider: bool | None = None
    """Whether ``total`` is the provider's own figure (OpenRouter's) rather than computed from
    the model's prices; pi 1.6.0 writes ``false`` on every usage a provider reported."""
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts of one response and their cost.

    ``reasoning`` is already part of ``output``; ``cache_write_1h`` is the part of
    ``cache_write`` written with one-hour retention. Both are absent when the provider did not
    say. Key order as pi's providers write them: ``reasoning`` is in the usage they build,
    before ``totalTokens``; ``cacheWrite1h`` is set on it afterwards (Anthropic, Bedrock), so
    it comes last.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int | None = None
    total_tokens: int = 0
    cost: Cost = attrs.field(factory=Cost)
    cache_write_1h: int | None = None
    extra: dict[str, Any] | None = extra_field()

    @property
    def context_tokens(self) -> int:
        """Tokens the response occupied in the context (pi's ``calculateContextTokens``)."""
        if self.total_tokens:
            return self.total_tokens
        return self.input + self.output + self.cache_read + self.cache_write


EMPTY_USAGE = Usage()


def combine_usage(first: Usage, *more: Usage) -> Usage:
    """The sum of usages (pi 1.6.0's ``combineUsage``; summary requests', nested tool calls'):
    every count and cost summed. (Optional splits a newer usage may carry are summed when
    either side has them; a provider-reported total stays so only when every part is.)"""
    total = first
    for other in more:
        total = _add(total, other)
    return total


def _add(first: Any, second: Any) -> Any:
    changes: dict[str, Any] = {}
    for field in attrs.fields(type(first)):
        a, b = getattr(first, field.name), getattr(second, field.name)
        if field.name == "extra":
            continue
        if attrs.has(type(a)) and type(a) is type(b):
            changes[field.name] = _add(a, b)
        elif isinstance(a, bool) or isinstance(b, bool):
            changes[field.name] = a is True and b is True
        elif isinstance(a, int | float) or isinstance(b, int | float):
            changes[field.name] = (a or 0) + (b or 0)
    return attrs.evolve(first, **changes)


@attrs.frozen(kw_only=True)
class Diagnostic:
    """A provider diagnostic attached to an assistant message."""

    type: str
    timestamp: int
    error: dict[str, Any] | None = None
    details: Any = None
    extra: dict[str, Any] | None = extra_field()


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
    timestamp: int
    # pi's providers add these to a message already made, in this order as they learn them,
    # so its JSON has them after the timestamp.
    provider_thinking_level: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    raw_stop_reason: str | None = None
    """The provider's own finish reason (``"stop"``, ``"tool_calls"``, ``"end_turn"``, ...)."""
    error_message: str | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    end_turn: bool | None = None
    # Added when the response is final: its time since the request began (pi-ai's stream
    # timer), then the session's thinking level the request was made at (pi's agent loop).
    duration_ms: int | None = None
    thinking_level: ThinkingLevel | None = None
    extra: dict[str, Any] | None = extra_field()

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool-call blocks of this response, in source order."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))


@attrs.frozen(kw_only=True)
class NestedToolCallRecord:
    """One call a tool made to another tool (bounded metadata, pi's ``NestedToolCallRecord``)."""

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    arguments_bytes: int | None = None
    status: Literal["ok", "error", "unfinished"]
    duration_ms: int | None = None
    error: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class NestedToolCalls:
    """The calls a tool made to other tools; ``complete`` is false when the list was cut."""

    calls: tuple[NestedToolCallRecord, ...]
    complete: bool
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The result of one tool call; ``details`` is for UIs and logs, never sent to the model."""

    role: Literal["toolResult"] = tag("toolResult")
    tool_call_id: str
    tool_name: str
    content: tuple[TextContent | ImageContent, ...]
    details: Any = None
    usage: Usage | None = None
    """Model work the tool did itself (nested requests); not the main request's usage."""
    is_error: bool
    duration_ms: int | None = None
    """How long the tool ran; absent for a call refused before it ran."""
    timestamp: int
    nested_calls: NestedToolCalls | None = None
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
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CompactionSummaryMessage:
    """The summary of compacted history, synthesized from a ``compaction`` entry."""

    role: Literal["compactionSummary"] = tag("compactionSummary")
    summary: str
    tokens_before: int
    timestamp: int
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolDeclaration:
    """A tool as a transcript declares it to the model (pi's ``Tool`` in ``toolsAdded``): name,
    description, JSON-schema parameters and, for tools that ask for it, how a provider may
    constrain the model's arguments (``constrainedSampling``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    constrained_sampling: dict[str, Any] | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolReference:
    """A tool named by a transcript's ``toolsRemoved``."""

    name: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SystemMessage:
    """The system prompt and the tool set as the transcript carries them (pi 1.6.0's
    ``system`` role). The first one of a session declares every prompt section and tool;
    later ones are patches: ``sections`` replaces sections by name (``None`` removes one),
    ``tools_added`` / ``tools_removed`` change the tool set, ``content`` appends text.
    Replaying them in order gives the prompt and tools a request carries
    (:mod:`pitrio.messages.transcript`). The field order is pi's as it writes them (the
    timestamp before the tool changes)."""

    role: Literal["system"] = tag("system")
    content: str | tuple[TextContent, ...] = ""
    sections: dict[str, str | None] | None = None
    timestamp: int
    tools_added: tuple[ToolDeclaration, ...] | None = None
    tools_removed: tuple[ToolReference, ...] | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SystemCheckpoint:
    """A compaction's ``systemMessage``: every system message before it replayed into one
    (the prompt and tools at the compaction). pi writes its fields in this order, the
    timestamp last; as a context message it becomes a :class:`SystemMessage`."""

    role: Literal["system"] = tag("system")
    content: str | tuple[TextContent, ...] = ""
    sections: dict[str, str | None] | None = None
    tools_added: tuple[ToolDeclaration, ...] | None = None
    tools_removed: tuple[ToolReference, ...] | None = None
    timestamp: int
    extra: dict[str, Any] | None = extra_field()

    def message(self) -> SystemMessage:
        """The checkpoint as the leading system message of a compacted context. pi 1.6.0
        lists it with the checkpoint's key order (the timestamp last), so it keeps that."""
        extra = self.extra
        if not isinstance(extra, Extra):  # decoded ones already remember their order
            extra = Extra(dict(extra or {}), _CHECKPOINT_ORDER)
        return SystemMessage(
            content=self.content,
            sections=self.sections,
            timestamp=self.timestamp,
            tools_added=self.tools_added,
            tools_removed=self.tools_removed,
            extra=extra,
        )


_CHECKPOINT_ORDER = ("role", "content", "sections", "toolsAdded", "toolsRemoved", "timestamp")


@attrs.frozen(kw_only=True)
class UnknownMessage:
    """A message of a role this version does not know (a newer pi's, an extension's), kept as
    its JSON object ``data`` and written back as it was; never sent to a model."""

    data: dict[str, Any] = opaque_field()  # noqa: RUF009 - attrs' field declaration

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.data.get("role"), str):
            raise ValueError("a message needs a string 'role'")

    @property
    def role(self) -> str:
        """The message's role."""
        role: str = self.data["role"]
        return role

    @property
    def timestamp(self) -> int:
        """The message's ``timestamp`` when it has a numeric one, else 0."""
        value = self.data.get("timestamp")
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


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
    | UnknownMessage
)
"""Any message of an agent transcript (an unknown role decodes as :class:`UnknownMessage`)."""

reuse_encodings(*get_args(AgentMessage))


@attrs.frozen(kw_only=True)
class AgentToolResult:
    """What a tool returns (or streams as a partial result): content, details, terminate."""

    content: tuple[TextContent | ImageContent, ...]
    details: Any = None
    structured_content: Any = None
    """Machine-readable output next to ``content`` (the bash tool's ``{output, truncated,
    exit_code, wall_time_seconds}``); carried by ``tool_execution_end``, not stored."""
    usage: Usage | None = None
    terminate: bool | None = None
    is_error: bool | None = None
    """A tool may report failure by returning a result with ``is_error`` rather than raising
    (pi 1.6.0's bash does, for a non-zero exit)."""
    extra: dict[str, Any] | None = extra_field()


def user_message(
    text: str, images: tuple[ImageContent, ...] = (), *, timestamp: int | None = None
) -> UserMessage:
    """Build the user message pi builds for a text prompt: one text block, then the images."""
    return UserMessage(
        content=(TextContent(text=text), *images),
        timestamp=now_ms() if timestamp is None else timestamp,
    )
