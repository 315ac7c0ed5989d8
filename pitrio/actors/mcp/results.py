"""An MCP ``tools/call`` result as pi's tool-result content (text and image parts). Pure.

* ``text`` blocks stay text; ``image`` blocks become image parts (base64 and MIME type kept).
* An embedded ``resource`` becomes its text (headed by its URI), or an image part when it is a
  blob of an ``image/*`` type; other blobs, ``audio`` blocks and ``resource_link`` blocks become
  one line of text saying what was there (the model cannot take them).
* A result with no content but ``structuredContent`` shows that as pretty JSON.
* The text is limited like the built-in tools' output (2000 lines or 50 KB in all, the start
  kept), with a closing line saying what was left out; the whole size is in ``details``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp_types
import orjson

from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_head,
    utf8_len,
)
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import ImageContent, TextContent

Part = TextContent | ImageContent


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _resource_parts(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> Part:
    uri = str(resource.uri)
    if isinstance(resource, mcp_types.TextResourceContents):
        return TextContent(text=f"[resource {uri}]\n{resource.text}")
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return ImageContent(data=resource.blob, mime_type=mime)
    return TextContent(
        text=f"[resource {uri}: {mime}, {format_size(_decoded_size(resource.blob))}, not shown]"
    )


def block_part(block: mcp_types.ContentBlock) -> Part:
    """One content block as one part."""
    match block:
        case mcp_types.TextContent():
            return TextContent(text=block.text)
        case mcp_types.ImageContent():
            return ImageContent(data=block.data, mime_type=block.mime_type)
        case mcp_types.AudioContent():
            size = format_size(_decoded_size(block.data))
            return TextContent(text=f"[audio: {block.mime_type}, {size}, not shown]")
        case mcp_types.ResourceLink():
            label = block.title or block.name
            mime = f", {block.mime_type}" if block.mime_type else ""
            return TextContent(text=f"[resource link: {label} <{block.uri}>{mime}]")
        case mcp_types.EmbeddedResource():
            return _resource_parts(block.resource)
    return TextContent(text=f"[unsupported MCP content: {getattr(block, 'type', '?')}]")


def limit_text(
    parts: list[Part], *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[list[Part], dict[str, Any] | None]:
    """Keep the text parts within the limits (in order, the start kept); images are kept.

    Returns the parts and, when something was cut, what ``details.truncation`` reports.
    """
    total_bytes = sum(utf8_len(p.text) for p in parts if isinstance(p, TextContent))
    total_lines = sum(p.text.count("\n") + 1 for p in parts if isinstance(p, TextContent))
    if total_bytes <= max_bytes and total_lines <= max_lines:
        return parts, None
    kept: list[Part] = []
    lines_left, bytes_left = max_lines, max_bytes
    for part in parts:
        if not isinstance(part, TextContent):
            kept.append(part)
            continue
        if lines_left <= 0 or bytes_left <= 0:
            continue
        cut = truncate_head(part.text, max_lines=lines_left, max_bytes=bytes_left)
        text = cut.content
        if cut.first_line_exceeds_limit:  # one huge line (JSON): keep its start anyway
            text = part.text.encode("utf-8", "replace")[:bytes_left].decode("utf-8", "ignore")
        if text:
            kept.append(TextContent(text=text))
        lines_left -= text.count("\n") + 1
        bytes_left -= utf8_len(text)
    shown = max_bytes - max(bytes_left, 0)
    kept.append(
        TextContent(
            text=f"\n[MCP result truncated: showing {format_size(shown)} of "
            f"{format_size(total_bytes)} ({total_lines} lines)]"
        )
    )
    return kept, {"totalBytes": total_bytes, "totalLines": total_lines, "outputBytes": shown}


def convert_result(result: mcp_types.CallToolResult) -> tuple[list[Part], dict[str, Any] | None]:
    """The parts of a result and the truncation report (``None``: nothing cut)."""
    parts = [block_part(block) for block in result.content]
    if not parts and result.structured_content is not None:
        text = orjson.dumps(result.structured_content, option=orjson.OPT_INDENT_2).decode()
        parts = [TextContent(text=text)]
    return limit_text(parts)


def error_text(parts: list[Part]) -> str:
    """An error result's message: its text parts joined (error results carry text only)."""
    texts = [part.text for part in parts if isinstance(part, TextContent)]
    return "\n".join(texts) or "MCP tool reported an error"


def agent_result(
    server: str, tool: str, parts: list[Part], truncation: dict[str, Any] | None
) -> AgentToolResult:
    """The tool result for the agent; ``details`` names the server and tool."""
    details: dict[str, Any] = {"mcpServer": server, "mcpTool": tool}
    if truncation is not None:
        details["truncation"] = truncation
    if not parts:
        parts = [TextContent(text="(no output)")]
    return AgentToolResult(content=tuple(parts), details=details)
