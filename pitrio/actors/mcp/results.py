"""An MCP result as pi 1.6.0 gives it to the model: content parts, details, the whole result.

* ``text`` blocks stay text, ``image`` blocks images. An embedded text resource is its text;
  a blob of an ``image/*`` type an image, of a text type (``text/*``, JSON, ``+json``,
  ``+xml``) its decoded text, of any other type a line naming the temporary file it was saved
  to. ``audio`` and ``resource_link`` blocks become one line of text saying what was there
  (a link names ``read_mcp_resource`` when its server's resources can be read).
* A result without content but with ``structuredContent`` shows that as JSON.
* The text of a result is at most 20 KB (UTF-8): longer text keeps its first and last 10 KB
  around a ``…N chars truncated…`` marker, in one text part, with the whole text saved to a
  temporary file that the part names; images follow it.
* ``details`` is ``{server, tool, fullOutputPath?}``; the whole ``CallToolResult`` (without
  ``_meta``) is the structured content; ``isError`` makes an error result that keeps the
  server's content (a line saying so when it has no text).

Saving files is the caller's :data:`Saver` (:func:`save_output` writes ``<tmp>/pi-mcp-<16
hex><ext>``, mode 0600, never over an existing path).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import mcp_types
import orjson

from pitrio.actors.mcp.naming import READ_MCP_RESOURCE
from pitrio.actors.tool_executor.tools.output_files import write_output_file
from pitrio.actors.tool_executor.tools.truncate import format_size, utf8_len
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import ImageContent, TextContent

Part = TextContent | ImageContent
Saver = Callable[[bytes, str], str]
MAX_TEXT_BYTES = 20 * 1024
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")


def save_output(data: bytes, extension: str) -> str:
    """Write ``data`` to a new private temporary file ``pi-mcp-...``; its path."""
    return write_output_file("pi-mcp", extension, data)


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data.encode()


def _is_text_type(mime: str | None) -> bool:
    kind = (mime or "").split(";", 1)[0].strip().lower()
    return bool(kind) and (
        kind.startswith("text/")
        or kind == "application/json"
        or kind.endswith("+json")
        or kind.endswith("+xml")
    )


def _extension(uri: str) -> str:
    found = _EXTENSION.search(urlsplit(uri).path or uri)
    return found.group() if found else ".bin"


def _blob(resource: mcp_types.BlobResourceContents, save: Saver) -> Part:
    uri, mime = str(resource.uri), resource.mime_type
    if mime and mime.startswith("image/"):
        return ImageContent(data=resource.blob, mime_type=mime)
    data = _decoded(resource.blob)
    if _is_text_type(mime):
        return TextContent(text=data.decode("utf-8", "replace"))
    kind = f"{mime or 'unknown type'}, {format_size(len(data))}"
    try:
        path = save(data, _extension(uri))
    except OSError as exc:
        return TextContent(text=f"[binary resource {uri} ({kind}) could not be saved: {exc}]")
    return TextContent(text=f"[binary resource {uri} ({kind}) saved to {path}]")


def block_part(
    server: str, block: mcp_types.ContentBlock, save: Saver, *, readable: bool = False
) -> Part:
    """One content block of ``server``'s as one part."""
    match block:
        case mcp_types.TextContent():
            return TextContent(text=block.text)
        case mcp_types.ImageContent():
            return ImageContent(data=block.data, mime_type=block.mime_type)
        case mcp_types.AudioContent():
            size = format_size(len(_decoded(block.data)))
            return TextContent(text=f"[audio: {block.mime_type}, {size}, not shown]")
        case mcp_types.ResourceLink():
            facts = ", ".join(
                f
                for f in (block.mime_type, None if block.size is None else format_size(block.size))
                if f
            )
            text = f'[resource link {block.uri} "{block.title or block.name}"'
            text += f" ({facts})" if facts else ""
            text += f": {block.description}" if block.description else ""
            if readable:
                text += f" (read it with {READ_MCP_RESOURCE}, server {server!r})"
            return TextContent(text=text + "]")
        case mcp_types.EmbeddedResource():
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                return TextContent(text=resource.text)
            return _blob(resource, save)
    return TextContent(text=f"[unsupported MCP content: {getattr(block, 'type', '?')}]")


def cut_middle(text: str, max_bytes: int = MAX_TEXT_BYTES) -> str | None:
    """``text`` with its middle replaced by ``…N chars truncated…`` so that the start and the
    end (``max_bytes / 2`` UTF-8 bytes each, whole characters) remain; ``None`` if it fits."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return None
    head_end = max_bytes // 2
    while head_end > 0 and (data[head_end] & 0xC0) == 0x80:
        head_end -= 1
    tail_start = len(data) - (max_bytes - max_bytes // 2)
    while tail_start < len(data) and (data[tail_start] & 0xC0) == 0x80:
        tail_start += 1
    removed = len(data[head_end:tail_start].decode("utf-8"))
    head, tail = data[:head_end].decode("utf-8"), data[tail_start:].decode("utf-8")
    return f"{head}\u2026{removed} chars truncated\u2026{tail}"


def limit_parts(parts: list[Part], save: Saver) -> tuple[list[Part], str | None]:
    """The parts within :data:`MAX_TEXT_BYTES` of text, and the full text's file if cut."""
    whole = "\n".join(part.text for part in parts if isinstance(part, TextContent))
    cut = cut_middle(whole)
    if cut is None:
        return parts, None
    lines = whole.count("\n") + 1 - (1 if whole.endswith("\n") else 0)
    size = utf8_len(whole)
    head = f"[MCP output cut in the middle: {format_size(size)}, {lines} lines, about "
    head += f"{-(-size // 4)} tokens]\n\n"
    path: str | None = None
    try:
        path = save(whole.encode("utf-8"), ".txt")
        where = f"\n\n[Full output: {path} (read it with offset and limit)]"
    except OSError as exc:
        where = f"\n\n[The full output could not be saved: {exc}]"
    images = [part for part in parts if isinstance(part, ImageContent)]
    return [TextContent(text=head + cut + where), *images], path


def result_parts(
    server: str, result: mcp_types.CallToolResult, save: Saver, *, readable: bool = False
) -> list[Part]:
    """The parts of a result before the size limit."""
    parts = [block_part(server, block, save, readable=readable) for block in result.content]
    if not parts and result.structured_content is not None:
        text = orjson.dumps(result.structured_content, option=orjson.OPT_INDENT_2).decode()
        parts = [TextContent(text=text)]
    return parts


def convert_result(
    server: str,
    tool: str,
    result: mcp_types.CallToolResult,
    *,
    readable: bool = False,
    save: Saver = save_output,
) -> AgentToolResult:
    """The agent's tool result for a ``tools/call`` result (blocking: it may save files)."""
    parts = result_parts(server, result, save, readable=readable)
    if result.is_error and not any(isinstance(p, TextContent) and p.text for p in parts):
        parts.append(TextContent(text=f"MCP tool {server}/{tool} reported an error"))
    parts, path = limit_parts(parts, save)
    details: dict[str, Any] = {"server": server, "tool": tool}
    if path is not None:
        details["fullOutputPath"] = path
    # What the server sent (fields the SDK fills in by default are not part of it).
    whole = result.model_dump(mode="json", by_alias=True, exclude_unset=True)
    whole.pop("_meta", None)
    return AgentToolResult(
        content=tuple(parts),
        details=details,
        structured_content=whole,
        is_error=True if result.is_error else None,
    )
