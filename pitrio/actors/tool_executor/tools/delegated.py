"""``read``, ``write`` and ``edit`` going through someone else's view of the files: an
editor's buffers (ACP's ``fs/read_text_file`` and ``fs/write_text_file``), unsaved changes
included.

Each is the built-in tool (same declaration, prompt lines, argument handling and result
texts) with the file's text read and written through the given callables. What an editor
cannot give falls back to the built-in on the disk, so errors and images read as pi's: a path
that is not a regular text file on disk (missing, a directory, an image), or a write whose
folder does not exist yet.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.edit import create_edit_tool, edit_text, replacements
from pitrio.actors.tool_executor.tools.images import SNIFF_BYTES, detect_image_mime
from pitrio.actors.tool_executor.tools.paths import resolve_read_path, resolve_to_cwd
from pitrio.actors.tool_executor.tools.read import create_read_tool, format_text, with_read_output
from pitrio.actors.tool_executor.tools.write import create_write_tool
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult

ReadText = Callable[[str], Awaitable[str]]
"""The text of a file (an absolute path) as the other side has it; raises to fail."""
WriteText = Callable[[str, str], Awaitable[None]]
"""Have the other side write a file's whole text."""
Args = dict[str, Any]


def _text_file(absolute: str) -> bool:
    """Whether ``absolute`` is a regular file on disk that is not an image."""
    try:
        if not stat.S_ISREG(os.stat(absolute).st_mode):
            return False
        with open(absolute, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    return detect_image_mime(head) is None


def _writable_place(absolute: str) -> bool:
    """Whether ``absolute``'s folder exists and ``absolute`` is no folder."""
    return os.path.isdir(os.path.dirname(absolute)) and not os.path.isdir(absolute)


async def _through(read_or_write: Awaitable[Any]) -> Any:
    """The other side's answer; its failure as the tool's error."""
    try:
        return await read_or_write
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"The editor could not do it: {exc}") from None


def delegated_file_tools(cwd: str, read_text: ReadText, write_text: WriteText) -> list[AgentTool]:
    """``read``, ``write`` and ``edit`` for a session in ``cwd``, through the callables (give
    them as custom tools: they replace the built-ins of the same names)."""
    read, write, edit = create_read_tool(cwd), create_write_tool(cwd), create_edit_tool(cwd)

    async def read_execute(call_id: str, args: Args, update: UpdateFn) -> AgentToolResult:
        absolute = resolve_read_path(args["path"], cwd, os.path.exists)
        if not await trio.to_thread.run_sync(_text_file, absolute):
            return await read.execute(call_id, args, update)
        text = await _through(read_text(absolute))
        body, details = format_text(str(text), args["path"], args.get("offset"), args.get("limit"))
        return with_read_output(text_result(body, details))

    async def write_execute(
        call_id: str, args: dict[str, Any], update: UpdateFn
    ) -> AgentToolResult:
        absolute = resolve_to_cwd(args["path"], cwd)
        if not await trio.to_thread.run_sync(_writable_place, absolute):
            return await write.execute(call_id, args, update)
        await _through(write_text(absolute, args["content"]))
        return text_result(f"Successfully wrote to {args['path']}")

    async def edit_execute(call_id: str, args: Args, update: UpdateFn) -> AgentToolResult:
        absolute = resolve_to_cwd(args["path"], cwd)
        edits = replacements(args)
        if not edits or not await trio.to_thread.run_sync(_text_file, absolute):
            return await edit.execute(call_id, args, update)
        raw = await _through(read_text(absolute))
        final, result = edit_text(str(raw), args["path"], edits)
        await _through(write_text(absolute, final))
        return result

    return [
        attrs.evolve(read, execute=read_execute),
        attrs.evolve(write, execute=write_execute),
        attrs.evolve(edit, execute=edit_execute),
    ]
