"""The ACP v1 messages pitrio sends, typed (attrs, frozen, slotted) and mapped to ACP's JSON,
and the checked reading of the parameters it receives.

Field names are ACP's (``sessionUpdate``, ``toolCallId``, ``stopReason``, ...); a value left
``None`` is left out of the JSON, as the schema's optional fields allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from pitrio.transports.acp.jsonrpc import invalid_params

PROTOCOL_VERSION = 1

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if value is not None}


@attrs.frozen(slots=True)
class TextBlock:
    """A ``text`` content block."""

    text: str

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {"type": "text", "text": self.text}


@attrs.frozen(slots=True)
class ImageBlock:
    """An ``image`` content block (base64 data)."""

    data: str
    mime_type: str

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {"type": "image", "data": self.data, "mimeType": self.mime_type}


Block = TextBlock | ImageBlock


@attrs.frozen(slots=True)
class Chunk:
    """``user_message_chunk``, ``agent_message_chunk`` or ``agent_thought_chunk``."""

    kind: Literal["user_message_chunk", "agent_message_chunk", "agent_thought_chunk"]
    content: Block

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON (the ``update`` of a ``session/update``)."""
        return {"sessionUpdate": self.kind, "content": self.content.to_json()}


@attrs.frozen(slots=True)
class Location:
    """A file a tool call touches."""

    path: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return _drop_none({"path": self.path, "line": self.line})


@attrs.frozen(slots=True)
class Diff:
    """A ``diff`` tool call content: the file's text before (``None``: a new file) and after."""

    path: str
    new_text: str
    old_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {
            "type": "diff",
            "path": self.path,
            "oldText": self.old_text,
            "newText": self.new_text,
        }


@attrs.frozen(slots=True)
class BlockContent:
    """A ``content`` tool call content: one block of output."""

    block: Block

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {"type": "content", "content": self.block.to_json()}


ToolContent = Diff | BlockContent


@attrs.frozen(slots=True)
class ToolCallStart:
    """``tool_call``: a call the model made, announced."""

    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolStatus = "pending"
    locations: tuple[Location, ...] = ()
    content: tuple[ToolContent, ...] = ()
    raw_input: Any = None

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        body: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": self.tool_call_id,
            "title": self.title,
            "kind": self.kind,
            "status": self.status,
            "locations": [loc.to_json() for loc in self.locations],
            "content": [part.to_json() for part in self.content],
        }
        if self.raw_input is not None:
            body["rawInput"] = self.raw_input
        return body


@attrs.frozen(slots=True)
class ToolCallProgress:
    """``tool_call_update``: what changed about a call (``None`` fields are unchanged)."""

    tool_call_id: str
    status: ToolStatus | None = None
    title: str | None = None
    kind: ToolKind | None = None
    locations: tuple[Location, ...] | None = None
    content: tuple[ToolContent, ...] | None = None
    raw_output: Any = None

    def fields(self) -> dict[str, Any]:
        """The ``ToolCallUpdate`` object (also what a permission request names)."""
        return _drop_none(
            {
                "toolCallId": self.tool_call_id,
                "status": self.status,
                "title": self.title,
                "kind": self.kind,
                "locations": None
                if self.locations is None
                else [loc.to_json() for loc in self.locations],
                "content": None
                if self.content is None
                else [part.to_json() for part in self.content],
                "rawOutput": self.raw_output,
            }
        )

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {"sessionUpdate": "tool_call_update", **self.fields()}


@attrs.frozen(slots=True)
class Command:
    """One entry of ``available_commands_update``."""

    name: str
    description: str
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        body: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint:
            body["input"] = {"hint": self.hint}
        return body


@attrs.frozen(slots=True)
class CommandsUpdate:
    """``available_commands_update``: the ``/`` commands a prompt may start with."""

    commands: tuple[Command, ...]

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [command.to_json() for command in self.commands],
        }


@attrs.frozen(slots=True)
class SelectOption:
    """A config option: one value to pick from (``select``)."""

    id: str
    name: str
    current: str
    values: tuple[tuple[str, str], ...]
    category: str | None = None

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON (``SessionConfigOption`` of type ``select``)."""
        return _drop_none(
            {
                "id": self.id,
                "name": self.name,
                "type": "select",
                "category": self.category,
                "currentValue": self.current,
                "options": [{"value": value, "name": name} for value, name in self.values],
            }
        )


@attrs.frozen(slots=True)
class ConfigUpdate:
    """``config_option_update``: every option with its value now."""

    options: tuple[SelectOption, ...]

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {
            "sessionUpdate": "config_option_update",
            "configOptions": [option.to_json() for option in self.options],
        }


@attrs.frozen(slots=True)
class ModeUpdate:
    """``current_mode_update``."""

    mode_id: str

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {"sessionUpdate": "current_mode_update", "currentModeId": self.mode_id}


@attrs.frozen(slots=True)
class PlanUpdate:
    """``plan``: an extension's whole plan (``ctx.ui.set_plan``), replacing the one shown."""

    entries: tuple[tuple[str, str, str], ...]
    """``(content, priority, status)`` of each entry."""

    @classmethod
    def from_frame(cls, entries: Any) -> PlanUpdate:
        """From a ``setPlan`` request's ``planEntries``: wrong entries are left out (they come
        from a session, which checked them, or from a daemon of another version)."""
        kept: list[tuple[str, str, str]] = []
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            content, priority, status = (entry.get(k) for k in ("content", "priority", "status"))
            if (
                isinstance(content, str)
                and priority in ("high", "medium", "low")
                and status in ("pending", "in_progress", "completed")
            ):
                kept.append((content, priority, status))
        return cls(tuple(kept))

    def to_json(self) -> dict[str, Any]:
        """ACP's JSON."""
        return {
            "sessionUpdate": "plan",
            "entries": [
                {"content": content, "priority": priority, "status": status}
                for content, priority, status in self.entries
            ],
        }


Update = (
    Chunk
    | ToolCallStart
    | ToolCallProgress
    | CommandsUpdate
    | ConfigUpdate
    | ModeUpdate
    | PlanUpdate
)


def session_update(session_id: str, update: Update) -> dict[str, Any]:
    """The params of a ``session/update`` notification."""
    return {"sessionId": session_id, "update": update.to_json()}


# -- reading parameters -----------------------------------------------------------------------


def params_object(params: Any) -> Mapping[str, Any]:
    """The params of a method that takes named ones (absent: none)."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise invalid_params("params must be an object")
    return params


def string_param(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    """A string parameter."""
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise invalid_params(f"{name} must be a non-empty string")
    return value


def absolute_path(params: Mapping[str, Any], name: str) -> str:
    """An absolute path parameter (ACP's ``cwd``)."""
    value = string_param(params, name)
    assert value is not None
    if not value.startswith("/"):
        raise invalid_params(f"{name} must be an absolute path")
    return value


def prompt_blocks(params: Mapping[str, Any]) -> tuple[str, tuple[ImageBlock, ...]]:
    """The text and images of a ``session/prompt``'s ``prompt`` blocks. Resource links and
    embedded text resources become text (the model reads the path or the text)."""
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        raise invalid_params("prompt must be an array of content blocks")
    texts: list[str] = []
    images: list[ImageBlock] = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise invalid_params("each prompt block must be an object with a type")
        kind = block["type"]
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "image" and isinstance(block.get("data"), str):
            mime = block.get("mimeType")
            if not isinstance(mime, str):
                raise invalid_params("an image block needs a mimeType")
            images.append(ImageBlock(block["data"], mime))
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            texts.append(block["uri"])
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            text = block["resource"].get("text")
            if not isinstance(text, str):
                raise invalid_params("only text resources are accepted")
            texts.append(text)
        else:
            raise invalid_params(f"a prompt block of type {kind!r} is not accepted")
    return "\n\n".join(texts), tuple(images)


def texts_of(blocks: Sequence[Block]) -> str:
    """The text of some blocks (tests and logs)."""
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def _pairs(server: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    """An ACP list of ``{name, value}`` (``env``, ``headers``) as a mapping."""
    items = server.get(key)
    if items is None:
        return {}
    if not isinstance(items, list):
        raise invalid_params(f"{what}: {key} must be an array")
    found: dict[str, str] = {}
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise invalid_params(f"{what}: each of {key} must have a string name and value")
        found[item["name"]] = item["value"]
    return found


def mcp_servers(params: Mapping[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``mcpServers`` as ``mcp.json`` entries by name: stdio (``command``, ``args``, ``env``)
    and ``http`` (``url``, ``headers``); ``sse`` is refused, as ``initialize`` says. A name's
    characters other than letters, digits, ``-`` and ``_`` become ``_`` (as in the tools'
    ``mcp__<server>__<tool>`` names)."""
    servers = params.get("mcpServers")
    if servers is None:
        return ()
    if not isinstance(servers, list):
        raise invalid_params("mcpServers must be an array")
    entries: list[tuple[str, dict[str, Any]]] = []
    for server in servers:
        if not isinstance(server, dict) or not isinstance(server.get("name"), str):
            raise invalid_params("each of mcpServers must be an object with a string name")
        name = "".join(
            c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in server["name"]
        )
        what = f"MCP server {server['name']!r}"
        kind = server.get("type")
        if kind == "sse":
            raise invalid_params(f"{what}: the sse transport is not supported (mcpCapabilities)")
        if kind == "http":
            if not isinstance(server.get("url"), str):
                raise invalid_params(f"{what}: url must be a string")
            entry: dict[str, Any] = {
                "type": "http",
                "url": server["url"],
                "headers": _pairs(server, "headers", what),
            }
        elif kind is None or kind == "stdio":
            args = server.get("args") or []
            if not isinstance(server.get("command"), str) or not server["command"]:
                raise invalid_params(f"{what}: command must be a string")
            if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
                raise invalid_params(f"{what}: args must be an array of strings")
            entry = {"command": server["command"], "args": args, "env": _pairs(server, "env", what)}
        else:
            raise invalid_params(f"{what}: unknown transport {kind!r}")
        entries.append((name or "_", entry))
    return tuple(entries)
