"""The ``ls`` tool (spec §5.8): one directory's entries, dotfiles included, ``/`` after dirs.

Entries are sorted case-insensitively and cut at the entry limit (default 500) and at 50 KB
of output; entries that cannot be inspected are skipped.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import trio

from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.fs_errors import node_error_text
from pitrio.actors.tool_executor.tools.paths import resolve_to_cwd
from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    NO_LINE_LIMIT,
    format_size,
    truncate_head,
)
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult

DEFAULT_LIMIT = 500

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Directory to list (default: the working directory)",
        },
        "limit": {
            "type": "number",
            "description": f"List at most this many entries (default: {DEFAULT_LIMIT})",
        },
    },
}

DESCRIPTION = (
    "List the entries of a directory, alphabetically, including dotfiles; directories end "
    f"with '/'. Returns at most {DEFAULT_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB of "
    "output (whichever comes first)."
)
PROMPT_SNIPPET = "List directory contents"


def format_entries(
    entries: list[str], *, limit: int, limit_reached: bool
) -> tuple[str, dict[str, Any] | None]:
    """The output and details for the listed entries (pure)."""
    if not entries:
        return "(empty directory)", None
    truncation = truncate_head("\n".join(entries), max_lines=NO_LINE_LIMIT)
    text = truncation.content
    details: dict[str, Any] = {}
    notices: list[str] = []
    if limit_reached:
        notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
        details["entryLimitReached"] = limit
    if truncation.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = truncation.to_details()
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return text, details or None


def list_directory(directory: str, limit: int) -> tuple[list[str], bool]:
    """The entries to show (blocking) and whether the limit cut the listing."""
    if not os.path.exists(directory):
        raise ToolError(f"Path not found: {directory}")
    if not os.path.isdir(directory):
        raise ToolError(f"Not a directory: {directory}")
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise ToolError(
            f"Cannot read directory: {node_error_text(exc, 'scandir', directory)}"
        ) from None
    names.sort(key=lambda name: (name.lower(), name))
    shown: list[str] = []
    for name in names:
        if len(shown) >= limit:
            return shown, True
        try:
            mode = os.stat(os.path.join(directory, name)).st_mode
        except OSError:
            continue  # a dangling link or a vanished entry
        shown.append(name + "/" if stat.S_ISDIR(mode) else name)
    return shown, False


def create_ls_tool(cwd: str) -> AgentTool:
    """The ``ls`` tool for a session whose working directory is ``cwd``."""

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        directory = resolve_to_cwd(args.get("path") or ".", cwd)
        limit_arg = args.get("limit")
        limit = int(limit_arg) if limit_arg is not None else DEFAULT_LIMIT
        entries, reached = await trio.to_thread.run_sync(
            list_directory, directory, limit, abandon_on_cancel=True
        )
        text, details = format_entries(entries, limit=limit, limit_reached=reached)
        return text_result(text, details)

    return AgentTool(
        name="ls",
        label="ls",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        prompt_snippet=PROMPT_SNIPPET,
    )
