"""Names and exposure of MCP tools as pi 1.6.0 gives them; pure (no ``mcp`` import).

* A server tool is ``mcp__<server>__<tool>`` with every character other than ASCII letters,
  digits and ``_`` turned into ``_``. A name longer than 64 characters, or one that another
  tool also maps to, is cut to 55 characters and gets ``_`` and the first 8 hex digits of the
  SHA-256 of ``<server>\\0<tool>`` (so ``a-b`` and ``a_b`` of one server both get a suffix,
  whatever their order in the listing).
* A server's namespace is ``mcp__<server>`` with ``-`` turned into ``_``; two configured
  servers whose names differ only there would share it, so the second one is refused.
* A tool's exposure is its exact ``toolExposure`` entry, else the first ``*`` pattern that
  matches it, else the server's ``exposure`` (``codemode`` when unset).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

Exposure = Literal["codemode", "deferred", "direct", "hidden"]
EXPOSURES: tuple[Exposure, ...] = ("codemode", "deferred", "direct", "hidden")
EXPOSURE_ALIASES: Mapping[str, Exposure] = {"codemode-deferred": "codemode"}
"""Older exposure names 1.6.0 still accepts, and what they stand for."""
DEFAULT_EXPOSURE: Exposure = "codemode"

MCP_PREFIX = "mcp__"
MAX_TOOL_NAME = 64
"""Model vendors accept at most 64 characters of ``[A-Za-z0-9_-]`` in a tool name."""
HASH_DIGITS = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")

LIST_MCP_RESOURCES = "list_mcp_resources"
LIST_MCP_RESOURCE_TEMPLATES = "list_mcp_resource_templates"
READ_MCP_RESOURCE = "read_mcp_resource"
RESOURCE_TOOLS = (LIST_MCP_RESOURCES, LIST_MCP_RESOURCE_TEMPLATES, READ_MCP_RESOURCE)


def mcp_tool_name(server: str, tool: str, is_taken: Callable[[str], bool] = lambda _: False) -> str:
    """The model-facing name of ``tool`` of ``server`` (``is_taken``: the plain name belongs
    to another tool, so this one gets the hash suffix)."""
    name = _UNSAFE.sub("_", f"{MCP_PREFIX}{server}__{tool}")
    if len(name) <= MAX_TOOL_NAME and not is_taken(name):
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:HASH_DIGITS]
    return f"{name[: MAX_TOOL_NAME - HASH_DIGITS - 1]}_{digest}"


def assign_tool_names(
    server: str, tools: Iterable[str], owners: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``{tool: name}`` for one server's listing. ``owners`` maps names already given to
    other servers' tools to their ``<server>\\0<tool>``; a plain name that two tools of this
    listing share, or that another tool owns, is hashed for every tool that has it."""
    owners = owners or {}
    listed = list(dict.fromkeys(tools))
    plain = [mcp_tool_name(server, tool) for tool in listed]
    shared = {name for name in plain if plain.count(name) > 1}
    given: dict[str, str] = {}
    used: set[str] = set()
    for tool in listed:
        owner = f"{server}\0{tool}"

        def taken(candidate: str, owner: str = owner) -> bool:
            other = owners.get(candidate)
            return (
                (other is not None and other != owner) or candidate in used or candidate in shared
            )

        name = mcp_tool_name(server, tool, taken)
        given[tool] = name
        used.add(name)
    return given


def mcp_namespace(server: str) -> str:
    """``mcp__<server>`` with ``-`` as ``_``: how scripts and the system prompt name a server."""
    return f"{MCP_PREFIX}{server.replace('-', '_')}"


def server_summary(description: str | None, instructions: str | None) -> str:
    """A server's one line: the first line of its ``description``, else of the instructions
    it sent when it connected; ``""`` without either."""
    text = (description or "").strip() or (instructions or "").strip()
    return text.split("\n", 1)[0].strip()


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A tool-name pattern where ``*`` matches any characters (``toolExposure``, ``--tools``)."""
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$")


def tool_exposure(
    exposure: Exposure | None, overrides: Iterable[tuple[str, Exposure]], tool: str
) -> Exposure:
    """The exposure of ``tool`` (the server's name for it): an exact ``toolExposure`` key
    wins, then the first matching pattern in the file's order, then the server's."""
    pairs = list(overrides)
    for key, value in pairs:
        if key == tool:
            return value
    for key, value in pairs:
        if "*" in key and pattern_regex(key).match(tool):
            return value
    return exposure or DEFAULT_EXPOSURE


def declared_exposure(exposure: Exposure) -> Exposure:
    """How pitrio reaches a tool of ``exposure``: as 1.6.0 does, now that it has both
    ``codemode`` (scripts call ``codemode`` tools) and ``tool_search`` (it loads ``deferred``
    ones). Kept as the one place such a mapping would live."""
    return exposure


CALL_TOOL_RESULT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "content": {"type": "array", "items": {"type": "object"}},
        "structuredContent": {"type": "object"},
        "isError": {"type": "boolean"},
    },
    "required": ["content"],
}
"""What a script's call of an MCP tool gives: the server's whole ``CallToolResult``."""


def is_mcp_tool(name: str) -> bool:
    """Whether a tool comes from MCP: ``mcp__...`` or one of the resource tools."""
    return name.startswith(MCP_PREFIX) or name in RESOURCE_TOOLS
