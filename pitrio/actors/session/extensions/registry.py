"""What one loaded extension registered: handlers, commands, tools, flags (spec §7.1, §7.2).

Registries are lists owned by the session that loaded the extension; everything that reads
them (the session's tasks, the loop's hooks) runs in the same trio thread. Handlers are appended
in place and removed (``on()``'s unsubscribe function) by replacing the list, so a reader walking
a list sees what it started with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from pitrio.actors.tool_executor import AgentTool

Handler = Callable[..., Any]
"""``handler(event, ctx)``: returns a result, ``None``, or an awaitable of either."""

CommandHandler = Callable[..., Any]
"""``handler(args, ctx)``: may be a coroutine function."""

Scope = Literal["user", "project", "temporary"]

EVENT_NAMES = frozenset(
    {
        "project_trust",
        "cache_warming_decision",
        "resources_discover",
        "session_start",
        "session_before_switch",
        "session_before_fork",
        "session_before_compact",
        "session_compact",
        "session_before_tree",
        "session_tree",
        "session_shutdown",
        "context",
        "before_provider_request",
        "after_provider_response",
        "before_agent_start",
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "tool_call",
        "tool_result",
        "user_bash",
        "input",
        "model_select",
        "thinking_level_select",
        "agent_before_settle",
        "agent_settled",
        "session_compact_failed",
        "queue_update",
        "compaction_start",
        "compaction_end",
        "auto_retry_start",
        "auto_retry_end",
        # pi 1.6.0 (issue 35, item 5)
        "session_info_changed",
        "ui_prompt_start",
        "ui_prompt_end",
        "context_with_system",
        "before_provider_headers",
        "provider_stream_event",
        "mcp_servers_change",
    }
)
"""Every event name :meth:`ExtensionAPI.on` accepts."""

RESERVED_COMMANDS = frozenset(
    {
        "settings",
        "model",
        "scoped-models",
        "export",
        "share",
        "copy",
        "name",
        "session",
        "changelog",
        "hotkeys",
        "fork",
        "clone",
        "tree",
        "login",
        "logout",
        "new",
        "compact",
        "resume",
        "reload",
        "quit",
    }
)
"""Built-in command names an extension command may not take."""


@attrs.frozen(kw_only=True)
class SourceInfo:
    """Where an extension came from, as ``get_commands`` reports it."""

    path: str
    source: str
    scope: Scope
    origin: Literal["package", "top-level"] = "top-level"

    def to_json(self) -> dict[str, Any]:
        """pi's ``sourceInfo`` object."""
        return {
            "path": self.path,
            "source": self.source,
            "scope": self.scope,
            "origin": self.origin,
        }


@attrs.frozen(kw_only=True)
class Command:
    """A slash command registered by an extension."""

    name: str
    description: str | None
    handler: CommandHandler
    extension: Extension = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class Flag:
    """A command-line flag an extension declared (``--name``)."""

    name: str
    description: str | None
    type: Literal["boolean", "string"]
    default: Any


@attrs.define(eq=False)
class Extension:
    """One loaded extension and everything it registered, in registration order."""

    path: str
    source_info: SourceInfo
    handlers: dict[str, list[Handler]] = attrs.field(factory=dict)
    commands: list[Command] = attrs.field(factory=list)
    tools: list[AgentTool] = attrs.field(factory=list)
    flags: dict[str, Flag] = attrs.field(factory=dict)
    flag_values: dict[str, Any] = attrs.field(factory=dict)

    def handlers_for(self, event: str) -> list[Handler]:
        """This extension's handlers of ``event`` (registration order)."""
        return self.handlers.get(event, [])


def parse_flag_args(
    extensions: list[Extension], args: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]]:
    """Values of the command-line flags extensions declared, and the arguments no extension
    declared. ``--name`` sets a boolean flag; a string flag takes ``--name=value`` (a separate
    value word would be read as a prompt by the command line)."""
    declared = {name: flag for extension in extensions for name, flag in extension.flags.items()}
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for arg in args:
        name, has_value, value = arg.removeprefix("--").partition("=")
        flag = declared.get(name) if arg.startswith("--") else None
        if flag is None:
            unknown.append(arg)
        elif flag.type == "boolean":
            if has_value and value not in ("true", "false"):
                unknown.append(arg)
            else:
                values[name] = value != "false"
        elif has_value:
            values[name] = value
        else:
            unknown.append(arg)  # a string flag needs its value
    return values, unknown


def invocation_names(extensions: list[Extension]) -> tuple[list[tuple[str, Command]], list[str]]:
    """Every extension command with the name it is invoked by, and the problems found.

    A name taken by a built-in command is dropped with a warning; the same name registered by
    several extensions gets ``name:1``, ``name:2``, ... in load order (spec §7.2).
    """
    problems: list[str] = []
    counts: dict[str, int] = {}
    for extension in extensions:
        for command in extension.commands:
            counts[command.name] = counts.get(command.name, 0) + 1
    taken: set[str] = set()
    seen: dict[str, int] = {}
    named: list[tuple[str, Command]] = []
    for extension in extensions:
        for command in extension.commands:
            if command.name in RESERVED_COMMANDS:
                problems.append(
                    f"{extension.path}: command /{command.name} conflicts with a built-in "
                    "command and was skipped"
                )
                continue
            name = command.name
            if counts[command.name] > 1:
                seen[command.name] = seen.get(command.name, 0) + 1
                name = f"{command.name}:{seen[command.name]}"
                while name in taken:
                    name += "'"
            taken.add(name)
            named.append((name, command))
    return named, problems


def tool_conflicts(extensions: list[Extension]) -> tuple[list[AgentTool], list[str]]:
    """Extension tools with the first registration of each name winning (spec S211)."""
    chosen: dict[str, AgentTool] = {}
    owner: dict[str, str] = {}
    problems: list[str] = []
    for extension in extensions:
        for tool in extension.tools:
            if tool.name in chosen:
                problems.append(
                    f"{extension.path}: tool {tool.name!r} is already registered by "
                    f"{owner[tool.name]}; the first registration is kept"
                )
                continue
            chosen[tool.name] = tool
            owner[tool.name] = extension.path
    return list(chosen.values()), problems
