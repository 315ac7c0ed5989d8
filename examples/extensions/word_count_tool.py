"""A new tool for the model: ``word_count`` counts lines, words and characters of a file.

It shows the pieces of a tool: a JSON schema for the arguments (checked before the tool runs),
a prompt snippet and a guideline for the system prompt, and a result with text for the model
and ``details`` for clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pitrio.actors.tool_executor import AgentTool, text_result


def setup(api: Any) -> None:
    """Register ``word_count`` (working relative to the session's directory)."""

    async def execute(call_id: str, args: dict[str, Any], on_update: Any) -> Any:
        import trio

        path = Path(args["path"])
        target = path if path.is_absolute() else Path(api.cwd) / path
        text = await trio.Path(target).read_text(encoding="utf-8", errors="replace")
        counts = {"lines": len(text.splitlines()), "words": len(text.split()), "chars": len(text)}
        summary = f"{args['path']}: {counts['lines']} lines, {counts['words']} words, "
        summary += f"{counts['chars']} characters"
        return text_result(summary, details=counts)

    api.register_tool(
        AgentTool(
            name="word_count",
            label="Word count",
            description="Count the lines, words and characters of a text file.",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File to count"}},
                "required": ["path"],
                "additionalProperties": False,
            },
            execute=execute,
            prompt_snippet="Count lines, words and characters of a file",
            prompt_guidelines=("Use word_count instead of bash wc for a single file.",),
        )
    )
