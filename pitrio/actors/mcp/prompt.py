"""The ``mcp_servers`` section of the system prompt, as pi 1.6.0 writes it. Pure.

The section lists every enabled server some of whose tools the model reaches only through
another tool (``codemode`` scripts, or ``tool_search``), since neither of those lists the
servers: one line per server, by name (``localeCompare`` order), ``- mcp__<server> (<how>)``
and ``: <summary>`` (:func:`~pitrio.actors.mcp.naming.server_summary`). A first line says
which of the two ways the listed servers use. The section holds at most 4096 characters
(JavaScript's UTF-16 units): summaries are cut to fit (at most 250 each, an ellipsis ending
a cut one); when the bare lines alone do not fit, the last servers are left out and counted.

Which exposures count as reached indirectly is the caller's (``reach``): pitrio declares
``codemode`` tools directly until it has a codemode tool
(:func:`~pitrio.actors.mcp.naming.declared_exposure`), so its sessions list only servers with
``deferred`` tools (reached through ``tool_search``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from pitrio.actors.mcp.naming import DEFAULT_EXPOSURE, Exposure, mcp_namespace, server_summary
from pitrio.messages.collation import collation_key

SECTION = "mcp_servers"
MAX_SECTION = 4096
MAX_SUMMARY = 250
Reach = Callable[[Exposure], Exposure]


@attrs.frozen
class ListedServer:
    """What the section needs of one server."""

    name: str
    exposure: Exposure | None = None
    tool_exposures: tuple[Exposure, ...] = ()
    description: str | None = None
    instructions: str | None = None
    enabled: bool = True

    def exposures(self, reach: Reach) -> set[Exposure]:
        """Every exposure its tools may have, as the session reaches them."""
        return {reach(e) for e in (self.exposure or DEFAULT_EXPOSURE, *self.tool_exposures)}


def _units(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript counts it."""
    return len(text.encode("utf-16-le")) // 2


def _head(text: str, units: int) -> str:
    """At most ``units`` UTF-16 units of ``text``, never half a character."""
    out: list[str] = []
    used = 0
    for char in text:
        size = 2 if ord(char) > 0xFFFF else 1
        if used + size > units:
            break
        out.append(char)
        used += size
    return "".join(out)


def _cut(text: str, limit: int) -> str:
    if _units(text) <= limit:
        return text
    return "" if limit <= 1 else _head(text, limit - 1).rstrip() + "\u2026"


def _intro(reaches: set[str]) -> str:
    # The words the model reads about its servers are pitrio's own.
    intro = "These MCP servers' tools are not declared to you."
    if "codemode" in reaches:
        intro += " Reach the tools of `codemode` servers from a codemode script."
    if "tool_search" in reaches:
        intro += " Use `tool_search` to load the tools of `tool_search` servers."
    return intro


def render_servers_section(servers: Sequence[ListedServer], reach: Reach) -> str | None:
    """The section's text (without its tag), or ``None`` when no server belongs in it."""
    listed = sorted(
        (s for s in servers if s.enabled and s.exposures(reach) & {"codemode", "deferred"}),
        key=lambda s: collation_key(s.name),
    )
    if not listed:
        return None
    ways = ["codemode" if "codemode" in s.exposures(reach) else "tool_search" for s in listed]
    intro = _intro(set(ways))
    heads = [f"- {mcp_namespace(s.name)} ({way})" for s, way in zip(listed, ways, strict=True)]

    def omitted(count: int) -> list[str]:
        if count <= 0:
            return []
        plural = "" if count == 1 else "s"
        return [f"- \u2026 {count} more server{plural} (searchTools() finds their tools)"]

    def size(kept: int) -> int:
        return _units("\n".join([intro, *heads[:kept], *omitted(len(listed) - kept)]))

    kept = len(listed)
    while kept > 0 and size(kept) > MAX_SECTION:
        kept -= 1
    each = 0 if kept == 0 else min(MAX_SUMMARY, (MAX_SECTION - size(kept)) // kept - 2)
    lines = [intro]
    for server, head in zip(listed[:kept], heads, strict=False):
        summary = server_summary(server.description, server.instructions) if each > 0 else ""
        summary = _cut(summary, each) if summary else ""
        lines.append(f"{head}: {summary}" if summary else head)
    return "\n".join([*lines, *omitted(len(listed) - kept)])
