"""Content blocks: the pieces of a message's ``content`` (pi-ai's Text/Thinking/Image/ToolCall)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pitrio.messages.codec import extra_field, tag


@attrs.frozen(kw_only=True)
class TextContent:
    """A run of text; ``text_signature`` is an opaque provider string kept for continuity."""

    type: Literal["text"] = tag("text")
    text: str
    text_signature: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingContent:
    """Model reasoning; ``redacted`` means the text was filtered and only the signature is kept."""

    type: Literal["thinking"] = tag("thinking")
    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ImageContent:
    """A base64 image with its MIME type."""

    type: Literal["image"] = tag("image")
    data: str
    mime_type: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call made by the model; only found inside assistant messages."""

    type: Literal["toolCall"] = tag("toolCall")
    id: str
    name: str
    arguments: dict[str, Any]
    thought_signature: str | None = None
    namespace: str | None = None
    """The OpenAI Responses namespace of a namespaced (dynamically loaded) tool."""
    extra: dict[str, Any] | None = extra_field()


UserBlock = TextContent | ImageContent
AssistantBlock = TextContent | ThinkingContent | ToolCall
UserContent = str | tuple[TextContent | ImageContent, ...]
"""User-like content: a plain string or text/image blocks."""


def text_of(content: UserContent | tuple[AssistantBlock, ...]) -> str:
    """Return the text of ``content``: the string itself, or its text blocks joined."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))
