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

from pitrio.actors.model_router.providers.strict_tools import resolve_strict, tool_parameters
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


# Keywords Anthropic's strict tool use refuses (the whole request fails with a 400).
_STRICT_REFUSED = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


def strict_refuses(key: str, value: Any) -> bool:
    """Whether Anthropic's strict mode refuses a schema node's ``key: value``."""
    if key in _STRICT_REFUSED:
        return True
    if key == "minItems":
        return value not in (0, 1) or isinstance(value, bool)
    if key == "format":
        return not isinstance(value, str) or value not in _STRICT_FORMATS
    return False


def _input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The root of a tool's schema as Anthropic takes it: no root unions (a 400), shared
    definitions and ``additionalProperties`` kept."""
    out: dict[str, Any] = {
        "type": "object",
        "properties": schema.get("properties") or {},
        "required": schema.get("required") or [],
    }
    for key in ("additionalProperties", "$defs", "definitions"):
        if key in schema:
            out[key] = schema[key]
    return out


def tools_of(model: Model, context: LlmContext, cache: dict[str, str] | None) -> list[Any]:
    """The tools as pi 1.6.0 sends them: eager input streaming unless the model's compat says
    otherwise, strict (with the strict schema) where the model's ``supportsStrictTools`` allows
    a tool that asks for it, the cache mark on the last one."""
    compat = compat_of(model)
    eager = compat.get("supportsEagerToolInputStreaming", True) is not False
    supported = compat.get("supportsStrictTools") is True
    tools: list[dict[str, Any]] = []
    for index, tool in enumerate(context.tools):
        strict = resolve_strict(tool, supported, strict_refuses)
        parameters = tool_parameters(tool, strict)
        schema = parameters if isinstance(parameters, Mapping) else {}
        entry: dict[str, Any] = {"name": tool.name, "description": tool.description}
        if eager:
            entry["eager_input_streaming"] = True
        if strict:
            entry["strict"] = True
            entry["input_schema"] = {**schema, **_input_schema(schema)}
        else:
            entry["input_schema"] = _input_schema(schema)
        if cache is not None and index == len(context.tools) - 1:
            entry["cache_control"] = cache
        tools.append(entry)
    return tools


def compat_of(model: Model) -> Mapping[str, Any]:
    """The model's ``compat`` mapping (empty when it has none)."""
    return model.compat if isinstance(model.compat, Mapping) else {}
