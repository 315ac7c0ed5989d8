"""The parts of an Anthropic Messages request whose form pi 0.73.1 fixes: tools, tool results,
adaptive thinking (checked against real pi by the differential harness's kind).

Tools carry ``eager_input_streaming`` unless the model's compat says otherwise, their schema
reduced to ``type``/``properties``/``required``, the cache mark on the last one. A tool result's
content is its text (blocks only with images, a placeholder text first when there is none) and
``is_error`` is always there. Opus 4.6/4.7 and Sonnet 4.6 think adaptively: an effort, no budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.model import LlmContext, Model

ADAPTIVE_MARKS = ("opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6")


def tool_result_content(message: ToolResultMessage) -> str | list[dict[str, Any]]:
    """A result's ``content`` as pi sends it: its texts joined by newlines, or with images the
    blocks (a placeholder text first when there is no text)."""
    if not any(isinstance(b, ImageContent) for b in message.content):
        return "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            blocks.append({"type": "text", "text": block.text})
        else:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def tool_result(message: ToolResultMessage) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": tool_result_content(message),
        "is_error": message.is_error,
    }


def adaptive_thinking(model: Model) -> bool:
    """Whether ``model`` thinks adaptively (Opus 4.6/4.7, Sonnet 4.6: an effort, no budget)."""
    return any(mark in model.id for mark in ADAPTIVE_MARKS)


def adaptive_effort(model: Model, level: str) -> str:
    """The ``output_config.effort`` of ``level`` for an adaptive model (pi's mapping)."""
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str):
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium"}.get(level, "high")


def tools_of(model: Model, context: LlmContext, cache: dict[str, str] | None) -> list[Any]:
    """The tools as pi 0.73.1 sends them: eager input streaming unless the model's compat
    says otherwise, the schema reduced to its properties and required names, the cache mark
    on the last one."""
    eager = compat_of(model).get("supportsEagerToolInputStreaming", True) is not False
    tools: list[dict[str, Any]] = []
    for index, tool in enumerate(context.tools):
        schema = tool.parameters if isinstance(tool.parameters, Mapping) else {}
        entry: dict[str, Any] = {"name": tool.name, "description": tool.description}
        if eager:
            entry["eager_input_streaming"] = True
        entry["input_schema"] = {
            "type": "object",
            "properties": schema.get("properties", {}),
            "required": schema.get("required", []),
        }
        if cache is not None and index == len(context.tools) - 1:
            entry["cache_control"] = cache
        tools.append(entry)
    return tools


def compat_of(model: Model) -> Mapping[str, Any]:
    """The model's ``compat`` mapping (empty when it has none)."""
    return model.compat if isinstance(model.compat, Mapping) else {}
