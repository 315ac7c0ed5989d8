"""The assistant stream protocol (pi-ai's ``AssistantMessageEvent``, spec §1.7).

Every event but ``done``/``error`` carries ``partial``, the message so far. A stream emits
``start`` first and ends with exactly one ``done`` or ``error``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import attrs

from pitrio.messages.agent import AssistantMessage
from pitrio.messages.codec import extra_field, tag
from pitrio.messages.content import ToolCall


@attrs.frozen(kw_only=True)
class StreamStart:
    """The stream began; ``partial`` is the empty message."""

    type: Literal["start"] = tag("start")
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class TextStart:
    """A text block opened at ``content_index``."""

    type: Literal["text_start"] = tag("text_start")
    content_index: int
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class TextDelta:
    """More text for the block at ``content_index``."""

    type: Literal["text_delta"] = tag("text_delta")
    content_index: int
    delta: str
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class TextEnd:
    """The text block at ``content_index`` is complete; ``content`` is its whole text."""

    type: Literal["text_end"] = tag("text_end")
    content_index: int
    content: str
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingStart:
    """A thinking block opened at ``content_index``."""

    type: Literal["thinking_start"] = tag("thinking_start")
    content_index: int
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingDelta:
    """More reasoning text for the block at ``content_index``."""

    type: Literal["thinking_delta"] = tag("thinking_delta")
    content_index: int
    delta: str
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingEnd:
    """The thinking block at ``content_index`` is complete."""

    type: Literal["thinking_end"] = tag("thinking_end")
    content_index: int
    content: str
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolCallStart:
    """A tool call opened at ``content_index``."""

    type: Literal["toolcall_start"] = tag("toolcall_start")
    content_index: int
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """More raw JSON of the arguments of the tool call at ``content_index``."""

    type: Literal["toolcall_delta"] = tag("toolcall_delta")
    content_index: int
    delta: str
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolCallEnd:
    """The tool call at ``content_index`` is complete."""

    type: Literal["toolcall_end"] = tag("toolcall_end")
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class StreamDone:
    """The stream ended normally with the final ``message``."""

    type: Literal["done"] = tag("done")
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class StreamError:
    """The stream ended in failure or abort; ``error`` is the final message."""

    type: Literal["error"] = tag("error")
    reason: Literal["aborted", "error"]
    error: AssistantMessage
    extra: dict[str, Any] | None = extra_field()


AssistantMessageEvent = (
    StreamStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamDone
    | StreamError
)
"""Any event of an assistant stream."""


class EventSender(Protocol):
    """Where a stream function sends its events. A memory channel's send side is one; the
    agent loop's intake and the trace's recorder stand in for it. Only these two calls are
    made, so a stand-in needs no cast."""

    async def send(self, value: AssistantMessageEvent, /) -> None:
        """Send one event, waiting while the receiver is behind."""

    def send_nowait(self, value: AssistantMessageEvent, /) -> None:
        """Send one event at once (raises ``trio.WouldBlock`` when the receiver is full)."""


PartialUpdate = (
    TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
)
"""The events that update a partial message (carried by ``message_update``)."""
