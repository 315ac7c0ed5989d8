"""The ``read`` tool (spec §5.2): text with offset/limit and head truncation, or an image.

Images (detected by content) come back as a note plus an image block, scaled down when Pillow
is installed; text is cut to 2000 lines / 50 KB with a notice telling the model how to go on.
The text rules are the pure :func:`format_text`. A small regular text file is read on the
event loop; anything else (large files, images, errors) runs in a worker thread.
"""

from __future__ import annotations

import base64
import math
import os
import stat
from typing import Any

import attrs
import trio

from pitrio.actors.tool_executor.context import current_call
from pitrio.actors.tool_executor.jsvalues import js_number_to_string
from pitrio.actors.tool_executor.tool import JSON_SCHEMA_PREFER, AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.fs_errors import node_error_text
from pitrio.actors.tool_executor.tools.images import (
    OMITTED_NOTE,
    SNIFF_BYTES,
    detect_image_mime,
    resize_image,
    resizing_available,
)
from pitrio.actors.tool_executor.tools.paths import resolve_read_path
from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_head,
    utf8_len,
)
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.model import Model

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {
            "type": "string",
            "description": "File to read, relative to the working directory or absolute",
        },
        "offset": {"type": "number", "description": "First line to return, counting from 1"},
        "limit": {"type": "number", "description": "How many lines to return at most"},
    },
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            "required": ["type", "data", "mimeType", "note"],
            "properties": {
                "type": {"const": "image"},
                "data": {"type": "string"},
                "mimeType": {"type": "string"},
                "note": {"type": "string"},
            },
        },
    ]
}
"""pi 1.6.0's ``outputSchema`` of read: a codemode script gets the text of a text file, and for
an image the block ``image()`` shows, with the text that goes with it as ``note``."""

DESCRIPTION = (
    "Read a file. Text files are returned as text; images (jpg, png, gif, webp) are returned as "
    f"image attachments. Text output stops after {DEFAULT_MAX_LINES} lines or "
    f"{DEFAULT_MAX_BYTES // 1024}KB, whichever comes first; use offset and limit to read a "
    "large file in parts, continuing with offset until you have what you need."
)
PROMPT_SNIPPET = "Read file contents"
PROMPT_GUIDELINES = ("Use read to examine files instead of cat or sed.",)

NO_VISION_NOTE = (
    "[Current model does not support images. The image will be omitted from this request.]"
)


@attrs.frozen(kw_only=True)
class ReadSettings:
    """``auto_resize_images``: scale large images down (pi's ``images.autoResize``)."""

    auto_resize_images: bool = True


def format_text(
    text: str, path: str, offset: float | None, limit: float | None
) -> tuple[str, dict[str, Any] | None]:
    """The text ``read`` returns for file content ``text`` and its details (pure).

    ``path`` is the path as the model gave it (used in the ``sed`` hint).
    """
    lines = text.split("\n")
    start = max(0, math.trunc(offset) - 1) if offset else 0
    if start >= len(lines):
        shown = js_number_to_string(offset) if offset is not None else "0"
        raise ToolError(f"Offset {shown} is beyond end of file ({len(lines)} lines total)")
    first_shown = start + 1
    user_limited: int | None = None
    if limit is not None:
        end = min(start + math.trunc(limit), len(lines))
        selected = "\n".join(lines[start:end])
        user_limited = end - start
    else:
        selected = "\n".join(lines[start:])
    truncation = truncate_head(selected)
    if truncation.first_line_exceeds_limit:
        size = format_size(utf8_len(lines[start]))
        limit_size = format_size(DEFAULT_MAX_BYTES)
        return (
            f"[Line {first_shown} is {size}, exceeds {limit_size} limit. Use bash: "
            f"sed -n '{first_shown}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            {"truncation": truncation.to_details()},
        )
    if truncation.truncated:
        last_shown = first_shown + truncation.output_lines - 1
        where = f"Showing lines {first_shown}-{last_shown} of {len(lines)}"
        if truncation.truncated_by != "lines":
            where += f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        notice = f"[{where}. Use offset={last_shown + 1} to continue.]"
        return f"{truncation.content}\n\n{notice}", {"truncation": truncation.to_details()}
    if user_limited is not None and start + user_limited < len(lines):
        remaining = len(lines) - (start + user_limited)
        next_offset = start + user_limited + 1
        notice = f"[{remaining} more lines in file. Use offset={next_offset} to continue.]"
        return f"{truncation.content}\n\n{notice}", None
    return truncation.content, None


def _image_result(
    data: bytes, mime: str, *, auto_resize: bool, model: Model | None
) -> AgentToolResult:
    no_vision = model is not None and "image" not in model.input
    if auto_resize and resizing_available():
        sized = resize_image(data, mime)
        if sized is None:
            note = f"Read image file [{mime}]\n{OMITTED_NOTE}"
            if no_vision:
                note += f"\n{NO_VISION_NOTE}"
            return AgentToolResult(content=(TextContent(text=note),))
        note = f"Read image file [{sized.mime_type}]"
        dimension = sized.dimension_note()
        if dimension:
            note += f"\n{dimension}"
        encoded, mime = sized.data, sized.mime_type
    else:
        # No image library: the image goes out as it is (pi without auto-resize).
        note = f"Read image file [{mime}]"
        encoded = base64.b64encode(data).decode("ascii")
    if no_vision:
        note += f"\n{NO_VISION_NOTE}"
    return AgentToolResult(
        content=(TextContent(text=note), ImageContent(data=encoded, mime_type=mime))
    )


def read_file(
    cwd: str,
    path: str,
    offset: float | None,
    limit: float | None,
    *,
    auto_resize: bool = True,
    model: Model | None = None,
) -> AgentToolResult:
    """Everything ``read`` does, synchronously (run it in a worker thread)."""
    absolute = resolve_read_path(path, cwd, os.path.exists)
    try:
        os.stat(absolute)
    except OSError as exc:
        raise ToolError(node_error_text(exc, "access", absolute)) from None
    if not os.access(absolute, os.R_OK):
        raise ToolError(f"EACCES: permission denied, access '{absolute}'")
    try:
        with open(absolute, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        raise ToolError("EISDIR: illegal operation on a directory, read") from None
    except OSError as exc:
        raise ToolError(node_error_text(exc, "open", absolute)) from None
    mime = detect_image_mime(data[:SNIFF_BYTES])
    if mime is not None:
        return _image_result(data, mime, auto_resize=auto_resize, model=model)
    text, details = format_text(data.decode("utf-8", "replace"), path, offset, limit)
    return text_result(text, details)


INLINE_READ_BYTES = 64 * 1024
"""A regular file at most this large is read on the event loop: from the page cache that
takes microseconds, and a worker thread's round trip costs the loop ~0.2 ms (issue 7)."""


def read_small_text(
    cwd: str, path: str, offset: float | None, limit: float | None
) -> AgentToolResult | None:
    """``read``'s result for a readable regular text file of at most
    :data:`INLINE_READ_BYTES`; ``None`` for anything else (which :func:`read_file`, in a
    worker thread, handles and reports)."""
    absolute = resolve_read_path(path, cwd, os.path.exists)
    try:
        status = os.stat(absolute)
        if not stat.S_ISREG(status.st_mode) or status.st_size > INLINE_READ_BYTES:
            return None
        if not os.access(absolute, os.R_OK):
            return None
        with open(absolute, "rb") as handle:
            data = handle.read(INLINE_READ_BYTES + 1)
    except OSError:
        return None
    if len(data) > INLINE_READ_BYTES or detect_image_mime(data[:SNIFF_BYTES]) is not None:
        return None  # grew meanwhile, or an image (resizing is work for a thread)
    text, details = format_text(data.decode("utf-8", "replace"), path, offset, limit)
    return text_result(text, details)


def with_read_output(result: AgentToolResult) -> AgentToolResult:
    """``result`` with pi 1.6.0's ``structuredContent`` for programmatic callers (pure): the
    text read, or for an image ``{type, data, mimeType, note}`` with the text as the note."""
    text = next((b.text for b in result.content if isinstance(b, TextContent)), "")
    image = next((b for b in result.content if isinstance(b, ImageContent)), None)
    structured: Any = text
    if image is not None:
        structured = {
            "type": "image",
            "data": image.data,
            "mimeType": image.mime_type,
            "note": text,
        }
    return attrs.evolve(result, structured_content=structured)


def create_read_tool(cwd: str, settings: ReadSettings | None = None) -> AgentTool:
    """The ``read`` tool for a session whose working directory is ``cwd``."""
    settings = settings or ReadSettings()

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        small = read_small_text(cwd, args["path"], args.get("offset"), args.get("limit"))
        if small is not None:
            return with_read_output(small)
        call = current_call()
        model = call.model if call is not None else None
        # Reading only: if abort wins, the thread's work is simply dropped.
        result = await trio.to_thread.run_sync(
            lambda: read_file(
                cwd,
                args["path"],
                args.get("offset"),
                args.get("limit"),
                auto_resize=settings.auto_resize_images,
                model=model,
            ),
            abandon_on_cancel=True,
        )
        return with_read_output(result)

    return AgentTool(
        name="read",
        label="read",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        prompt_snippet=PROMPT_SNIPPET,
        prompt_guidelines=PROMPT_GUIDELINES,
        constrained_sampling=JSON_SCHEMA_PREFER,
        output_schema=OUTPUT_SCHEMA,
    )
