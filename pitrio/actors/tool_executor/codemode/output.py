"""The codemode result as pi 1.6.0 lays it out (pure but for the files it is handed a saver for).

``Script completed`` / ``Script failed``, the wall time and ``Output:`` head the result; then
the items in the script's order (``==> text N/M <==`` before each text when there are several,
the returned value last), the ``console`` lines in one ``<console_output>`` block, and for a
failure ``Script error:`` with the error and the calls made before it. Past the token budget
the text keeps its start and end and the whole text goes to a file; each image is saved to a
file whose path precedes it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from pitrio.actors.tool_executor.codemode.sandbox import OutputItem, ScriptError
from pitrio.actors.tool_executor.tools.truncate import format_size
from pitrio.messages.content import ImageContent, TextContent

CHARS_PER_TOKEN = 4
DEFAULT_MAX_OUTPUT_TOKENS = 10_000
IMAGE_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}

Part = TextContent | ImageContent
Saver = Callable[[str, bytes], str]
"""``save(extension, data)``: the path of a new output file holding ``data``; may raise."""


@attrs.frozen
class Laid:
    """The result's content and the path of the whole text when it was cut."""

    content: tuple[Part, ...]
    full_output_path: str | None = None


def value_text(value: Any, raw_json: str | None) -> str:
    """A returned value as ``text()`` shows it: strings as they are, others as compact JSON."""
    if isinstance(value, str):
        return value
    return raw_json if raw_json is not None else "undefined"


def _format_items(items: Sequence[OutputItem]) -> list[Part]:
    total = sum(1 for item in items if item.kind == "text")
    parts: list[Part] = []
    console: list[str] = []
    index = 0
    for item in items:
        if item.kind == "image":
            parts.append(ImageContent(data=item.data, mime_type=item.mime_type or "image/png"))
        elif item.kind == "console":
            console.append(item.data)
        else:
            index += 1
            text = f"==> text {index}/{total} <==\n{item.data}" if total > 1 else item.data
            parts.append(TextContent(text=text))
    if console:
        parts.append(
            TextContent(text="<console_output>\n" + "\n".join(console) + "\n</console_output>")
        )
    return parts


def join_adjacent_text(parts: Sequence[Part]) -> list[Part]:
    """Adjacent texts as one, each part on its own line."""
    joined: list[Part] = []
    pieces: list[str] = []
    last = ""
    for part in parts:
        if not isinstance(part, TextContent):
            if pieces:
                joined.append(TextContent(text="".join(pieces)))
            pieces, last = [], ""
            joined.append(part)
            continue
        if last and not last.endswith("\n"):
            pieces.append("\n")
            last = "\n"
        pieces.append(part.text)
        if part.text:
            last = part.text
    if pieces:
        joined.append(TextContent(text="".join(pieces)))
    return joined


def call_summary(calls: Sequence[dict[str, Any]]) -> str:
    """The calls made before a failure (they are not undone)."""
    if not calls:
        return "No tool calls were made."
    listed = ", ".join(f"{call['name']} ({call['status']})" for call in calls)
    return f"Tool calls made before the failure (they are not undone): {listed}"


def error_text(error: ScriptError, calls: Sequence[dict[str, Any]]) -> str:
    """The text after ``Script error:``."""
    if error.kind == "script":
        head = error.stack or f"{error.name or 'Error'}: {error.message}"
    elif error.kind == "timeout":
        head = f"Script timed out: {error.message}"
    elif error.kind == "aborted":
        head = f"Script aborted: {error.message}"
    else:
        head = f"Script sandbox failed: {error.message}"
    return f"{head}\n\n{call_summary(calls)}"


def _truncate(parts: list[Part], max_tokens: int, save: Saver) -> tuple[list[Part], str | None]:
    texts = [part.text for part in parts if isinstance(part, TextContent)]
    combined = "\n".join(texts)
    budget = max_tokens * CHARS_PER_TOKEN
    if not texts or len(combined) <= budget:
        return parts, None
    head_chars = budget // 2
    tail_chars = budget - head_chars
    removed = len(combined) - head_chars - tail_chars
    head = combined[:head_chars]
    tail = combined[len(combined) - tail_chars :] if tail_chars > 0 else ""
    tokens = -(-len(combined) // CHARS_PER_TOKEN)
    text = (
        f"Warning: truncated output (original token count: {tokens})\n"
        f"Total output lines: {combined.count(chr(10)) + 1}\n\n"
        f"{head}…{-(-removed // CHARS_PER_TOKEN)} tokens truncated…{tail}"
    )
    path: str | None = None
    try:
        path = save(".txt", combined.encode("utf-8", "surrogatepass"))
        text += f"\n\n[Full output: {path} (read with offset/limit)]"
    except OSError as exc:
        text += f"\n\n[Could not save the full output: {exc}]"
    images = [part for part in parts if isinstance(part, ImageContent)]
    return [TextContent(text=text), *images], path


def _save_images(parts: list[Part], save: Saver) -> list[Part]:
    labels: dict[str, str] = {}
    out: list[Part] = []
    for part in parts:
        if isinstance(part, ImageContent):
            label = labels.get(part.data)
            if label is None:
                try:
                    data = base64.b64decode(part.data)
                except (binascii.Error, ValueError):
                    data = b""
                kind = f"{part.mime_type}, {format_size(len(data))}"
                try:
                    path = save(IMAGE_EXTENSIONS[part.mime_type], data)
                    label = f"[Image saved to {path} ({kind})]"
                except (OSError, KeyError) as exc:
                    label = f"[Image ({kind}) could not be saved: {exc}]"
                labels[part.data] = label
            out.append(TextContent(text=label))
        out.append(part)
    return out


def lay_out(
    output: Sequence[OutputItem],
    *,
    ok: bool,
    error: str | None,
    wall_seconds: float,
    max_output_tokens: int | None,
    save: Saver,
) -> Laid:
    """The whole result content: head, items, error, within the token budget."""
    parts = _format_items(output)
    if error is not None:
        parts.append(TextContent(text=f"Script error:\n{error}"))
    budget = DEFAULT_MAX_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens
    cut, path = _truncate(join_adjacent_text(parts), budget, save)
    body = join_adjacent_text(_save_images(cut, save))
    state = "Script completed" if ok else "Script failed"
    head = f"{state}\nWall time {wall_seconds:.1f} seconds\nOutput:\n"
    return Laid(content=(TextContent(text=head), *body), full_output_path=path)
