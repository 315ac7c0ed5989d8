"""A session's tool registry (spec §3.14, §5.9): definitions, allow/deny lists, active set.

* Definitions are keyed by name; a later registration replaces an earlier one of that name
  (keeping its place in the active order).
* ``allow`` (``None``: everything) and ``deny`` are lists of names where ``*`` matches any run
  of characters (``mcp_*``). A tool must be allowed and not denied to be registered at all;
  others are silently left out, as pi leaves out tools outside its ``--tools`` list.
* The active set is what the model is offered, in order. With an allow list every allowed
  tool is active (pi: ``--tools read,grep`` means exactly those).
* Prompt snippets are collapsed to one line, guidelines trimmed and de-duplicated (§5.9).

Pure: the actor shell (:mod:`pitrio.actors.tool_executor.actor`) owns one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from pitrio.actors.tool_executor.tool import AgentTool, Loadout
from pitrio.errors import ToolNotFoundError, ToolRegistryError

DEFAULT_ACTIVE_TOOLS = ("read", "bash", "edit", "write")
READ_ONLY_TOOLS = ("read", "grep", "find", "ls")


@attrs.frozen
class PromptEntry:
    """How one active tool appears in the system prompt: ``- name: snippet`` and guidelines."""

    name: str
    snippet: str | None
    guidelines: tuple[str, ...]


def normalize_snippet(text: str | None) -> str | None:
    """One line, single spaces; ``None`` when nothing is left."""
    if not text:
        return None
    one_line = " ".join(text.split())
    return one_line or None


def normalize_guidelines(guidelines: Iterable[str]) -> tuple[str, ...]:
    """Trimmed, empty ones dropped, duplicates dropped (first occurrence kept)."""
    seen: dict[str, None] = {}
    for line in guidelines:
        stripped = line.strip()
        if stripped:
            seen.setdefault(stripped, None)
    return tuple(seen)


def compile_name_patterns(patterns: Iterable[str]) -> re.Pattern[str]:
    """One regular expression matching any of ``patterns`` (``*`` = any characters)."""
    parts = [re.escape(pattern).replace(r"\*", ".*") for pattern in patterns]
    if not parts:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile("(?:" + "|".join(parts) + r")\Z")


_KNOWN_VALID: dict[int, Mapping[str, Any]] = {}


def mark_schema_valid(schema: Mapping[str, Any]) -> None:
    """Declare a module-constant schema valid, so registering it skips the check.

    For the built-in tools' schemas (a test checks them): checking them at every start-up
    imported jsonschema (~45 ms) and cost ~17 ms more before the first command was answered
    (issue 7, cold start). The entry holds the object, so its id stays unique.
    """
    _KNOWN_VALID[id(schema)] = schema


def check_definition(tool: AgentTool) -> None:
    """Refuse a tool with an empty name or a parameter schema that is not valid JSON Schema."""
    if not tool.name or tool.name != tool.name.strip():
        raise ToolRegistryError(f"Invalid tool name: {tool.name!r}")
    if _KNOWN_VALID.get(id(tool.parameters)) is tool.parameters:
        return
    # jsonschema ships no type information; its objects are typed as Any here. Imported on
    # first use (see mark_schema_valid).
    import jsonschema.exceptions  # type: ignore[import-untyped]
    import jsonschema.validators  # type: ignore[import-untyped]

    try:
        validator = jsonschema.validators.validator_for(tool.parameters)
        validator.check_schema(tool.parameters)
    except jsonschema.exceptions.SchemaError as exc:
        raise ToolRegistryError(
            f"Invalid parameters schema for tool {tool.name}: {exc.message}"
        ) from None


class ToolRegistry:
    """Definitions, filters and the active set of one session."""

    def __init__(self, *, allow: Sequence[str] | None = None, deny: Sequence[str] = ()) -> None:
        self._allow = None if allow is None else compile_name_patterns(allow)
        self._deny = compile_name_patterns(deny)
        self._tools: dict[str, AgentTool] = {}
        self._active: list[str] = []

    @property
    def has_allow_list(self) -> bool:
        """Whether an allow list restricts (and activates) the tools."""
        return self._allow is not None

    def allowed(self, name: str) -> bool:
        """Whether ``name`` passes the allow and deny lists."""
        if self._allow is not None and not self._allow.match(name):
            return False
        return not self._deny.match(name)

    def register(self, tools: Iterable[AgentTool], *, activate: bool) -> tuple[str, ...]:
        """Add or replace tools; returns the names registered (filtered ones are left out).

        ``activate`` appends new names to the active set; with an allow list every
        registered tool is active anyway.
        """
        tools = list(tools)
        for tool in tools:
            check_definition(tool)
        registered: list[str] = []
        for tool in tools:
            if not self.allowed(tool.name):
                continue
            self._tools[tool.name] = tool
            registered.append(tool.name)
            if (activate or self.has_allow_list) and tool.name not in self._active:
                self._active.append(tool.name)
        return tuple(registered)

    def unregister(self, names: Iterable[str]) -> None:
        """Remove tools (and from the active set); unknown names are ignored."""
        gone = set(names)
        for name in gone:
            self._tools.pop(name, None)
        self._active = [name for name in self._active if name not in gone]

    def set_active(self, names: Sequence[str]) -> None:
        """Make exactly ``names`` active, in order (duplicates dropped); unknown names fail."""
        unknown = [name for name in names if name not in self._tools]
        if unknown:
            raise ToolNotFoundError(f"Unknown tool: {unknown[0]}")
        self._active = list(dict.fromkeys(names))

    def get(self, name: str) -> AgentTool | None:
        """The registered tool called ``name``."""
        return self._tools.get(name)

    def all_tools(self) -> tuple[AgentTool, ...]:
        """Every registered tool, in registration order."""
        return tuple(self._tools.values())

    def active_names(self) -> tuple[str, ...]:
        """The active tool names, in order."""
        return tuple(self._active)

    def active_tools(self) -> tuple[AgentTool, ...]:
        """The declared tools: the active ones, in order, with the descriptions their loadout
        hooks give, less those the hooks hide (still callable: :meth:`callable_tools`)."""
        tools = tuple(self._tools[name] for name in self._active)
        hooks = [tool.prepare_loadout for tool in tools if tool.prepare_loadout is not None]
        if not hooks:
            return tools
        loadout = Loadout(declared=tools, callable=self.callable_tools())
        descriptions: dict[str, str] = {}
        hidden: set[str] = set()
        for hook in hooks:
            change = hook(loadout)
            descriptions.update(change.descriptions)
            hidden |= change.hidden
        return tuple(
            attrs.evolve(tool, description=descriptions[tool.name])
            if tool.name in descriptions
            else tool
            for tool in tools
            if tool.name not in hidden
        )

    def callable_tools(self) -> tuple[AgentTool, ...]:
        """What other tools may call (pi 1.6.0): the active ``direct`` tools and every
        ``codemode`` or ``deferred`` one, in registration order."""
        active = set(self._active)
        return tuple(
            tool
            for tool in self._tools.values()
            if tool.exposure in ("codemode", "deferred")
            or (tool.exposure == "direct" and tool.name in active)
        )

    def prompt_entries(self) -> tuple[PromptEntry, ...]:
        """The system-prompt lines of the active tools, in order."""
        return tuple(
            PromptEntry(
                name=tool.name,
                snippet=normalize_snippet(tool.prompt_snippet),
                guidelines=normalize_guidelines(tool.prompt_guidelines),
            )
            for tool in self.active_tools()
        )
