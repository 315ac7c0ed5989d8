"""Claude Code's tool names: what pi does to tools under an Anthropic OAuth token.

With a Claude Pro/Max token (``sk-ant-oat...``) pi 0.73.1 presents itself as Claude Code and
sends every tool whose name is one of Claude Code 2.x's (compared ignoring case) under Claude
Code's spelling, in the tool definitions and in the transcript's earlier tool calls alike
(``read`` goes out as ``Read``); other names go unchanged. A tool call in the reply is reported
under the name of the request's tool that matches it ignoring case, so the agent sees the name
it registered. Pure functions over the Messages API body.
"""

from __future__ import annotations

from typing import Any

from pitrio.messages.model import LlmContext

CLAUDE_CODE_TOOLS = (
    "Read", "Write", "Edit", "Bash", "Grep", "Glob", "AskUserQuestion", "EnterPlanMode",
    "ExitPlanMode", "KillShell", "NotebookEdit", "Skill", "Task", "TaskOutput", "TodoWrite",
    "WebFetch", "WebSearch",
)  # fmt: skip
"""Claude Code 2.x's tool names in their casing: under an OAuth token pi sends a tool whose
name matches one of these, ignoring case, under this spelling."""
_CLAUDE_CODE_BY_LOWER = {name.lower(): name for name in CLAUDE_CODE_TOOLS}


def claude_code_name(name: str) -> str:
    """``name`` in Claude Code's casing when it is one of its tools, else unchanged."""
    return _CLAUDE_CODE_BY_LOWER.get(name.lower(), name)


def reply_tool_names(context: LlmContext) -> dict[str, str]:
    """Lower-cased name -> the context's own name of each tool (the first of a clash wins),
    to report a tool call sent back in Claude Code's casing under the name it was given."""
    names: dict[str, str] = {}
    for tool in context.tools:
        names.setdefault(tool.name.lower(), tool.name)
    return names


def claude_code_tools(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API body with its tool definitions in Claude Code's casing (its turns as
    they are: built with the names renamed already, see ``AnthropicTurns``'s ``rename``)."""
    out = dict(body)
    if "tools" in body:
        out["tools"] = [{**tool, "name": claude_code_name(tool["name"])} for tool in body["tools"]]
    return out


def claude_code_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API body with its tools and its tool calls in Claude Code's casing."""
    # The tool definitions and the transcript's own tool calls must agree on the names,
    # so both are renamed (a new body: the turns may be shared with a prefix cache).
    out = claude_code_tools(body)
    out["messages"] = [
        {
            **turn,
            "content": [
                {**block, "name": claude_code_name(block["name"])}
                if block.get("type") == "tool_use"
                else block
                for block in turn["content"]
            ],
        }
        if turn["role"] == "assistant"
        else turn
        for turn in body["messages"]
    ]
    return out
