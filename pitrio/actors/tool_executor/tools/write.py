"""The ``write`` tool (spec §5.3): create or overwrite a file, creating parent directories.

The reported size is the content's length in UTF-16 code units, as pi reports it. Calls on
the same file are serialised by the batch (``mutates``).
"""

from __future__ import annotations

import os
from typing import Any

import trio

from pitrio.actors.tool_executor.jsvalues import to_utf8
from pitrio.actors.tool_executor.tool import JSON_SCHEMA_PREFER, AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.fs_errors import node_error_text
from pitrio.actors.tool_executor.tools.paths import resolve_to_cwd
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["path", "content"],
    "properties": {
        "path": {
            "type": "string",
            "description": "File to write, relative to the working directory or absolute",
        },
        "content": {"type": "string", "description": "The complete new content of the file"},
    },
}

DESCRIPTION = (
    "Write a file: create it, or replace everything in it if it exists. Missing parent "
    "directories are created."
)
PROMPT_SNIPPET = "Create or overwrite files"
PROMPT_GUIDELINES = ("Use write only for new files or complete rewrites.",)


def write_file(absolute: str, content: str) -> None:
    """Create parent directories and write ``content`` as UTF-8 (blocking)."""
    directory = os.path.dirname(absolute)
    try:
        os.makedirs(directory, exist_ok=True)
    except FileExistsError as exc:  # a parent is a file: Node reports ENOTDIR for mkdir -p
        raise ToolError(f"ENOTDIR: not a directory, mkdir '{directory}'") from exc
    except OSError as exc:
        raise ToolError(node_error_text(exc, "mkdir", directory)) from None
    try:
        with open(absolute, "wb") as handle:
            handle.write(to_utf8(content))
    except IsADirectoryError:
        raise ToolError(f"EISDIR: illegal operation on a directory, open '{absolute}'") from None
    except OSError as exc:
        raise ToolError(node_error_text(exc, "open", absolute)) from None


def create_write_tool(cwd: str) -> AgentTool:
    """The ``write`` tool for a session whose working directory is ``cwd``."""

    def target(args: dict[str, Any]) -> str:
        return resolve_to_cwd(args["path"], cwd)

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        path, content = args["path"], args["content"]
        await trio.to_thread.run_sync(write_file, target(args), content)
        return text_result(f"Successfully wrote to {path}")  # pi 1.6.0: no byte count

    return AgentTool(
        name="write",
        label="write",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        mutates=target,
        prompt_snippet=PROMPT_SNIPPET,
        prompt_guidelines=PROMPT_GUIDELINES,
        constrained_sampling=JSON_SCHEMA_PREFER,
    )
