"""MCP tools as agent tools: ``<server>__<tool>``, their schemas, and one call's life.

A name keeps the characters model vendors accept (letters, digits, ``_`` and ``-``; others
become ``_``) and at most 64 of them. The input schema is the server's, so arguments are
converted and checked like the built-in tools' before a call. A call asks the MCP actor for
the server's live connection (starting it again if it went away), then calls the tool in the
caller's task within the server's call limit; abort cancels the call, and the SDK tells the
server (``notifications/cancelled``). Every failure is an error result naming the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import mcp_types
import trio
from mcp import MCPError

from pitrio.actors.mcp.actor import Connection, McpHandle, describe
from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.results import agent_result, convert_result, error_text
from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.tool_executor.registry import check_definition
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import PitrioError, ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.ostext import check_json_texts

MAX_NAME = 64
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpToolError(ToolError):
    """An MCP tool call failed (the server's error, a time limit, a lost connection)."""


def tool_name(server: str, tool: str) -> str:
    """The agent tool's name for ``tool`` of ``server``."""
    return _UNSAFE.sub("_", f"{server}{SEPARATOR}{tool}")[:MAX_NAME]


def _schema(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    return schema


def make_tool(config: McpServerConfig, tool: mcp_types.Tool, mcp: McpHandle) -> AgentTool:
    """One agent tool calling ``tool`` on the server of ``config``."""
    server, remote = config.name, tool.name

    async def execute(
        tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        connection = await mcp.connect(server)
        return await call_tool(connection, remote, args, config.call_timeout, mcp)

    return AgentTool(
        name=tool_name(server, remote),
        label=tool.title or remote,
        description=tool.description or f"{remote} (MCP server {server})",
        parameters=_schema(tool),
        execute=execute,
    )


async def call_tool(
    connection: Connection, tool: str, args: dict[str, Any], limit: float, mcp: McpHandle
) -> AgentToolResult:
    """Call ``tool`` on a live connection within ``limit`` seconds; raise on any failure."""
    server = connection.server
    # The SDK serialises the call strictly: a lone surrogate would fail in its writer task.
    check_json_texts(args, "arguments")
    with trio.move_on_after(limit) as scope:
        try:
            result = await connection.session.call_tool(tool, args)
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise McpToolError(f"MCP server {server}: {tool}: {exc.message}") from None
            state = mcp.state_of(server)
            error = state.error if state is not None and state.error else None
            error = error or f"MCP server {server} closed the connection during the call"
            await mcp.lost(connection, error)
            raise McpServerError(error) from None
        except (PitrioError, trio.Cancelled):
            raise
        except Exception as exc:  # the transport failed (an HTTP server gone): reconnect next
            error = f"MCP server {server}: {tool}: {describe(exc)}"
            await mcp.lost(connection, error)
            raise McpToolError(error) from None
    if scope.cancelled_caught:
        raise McpToolError(
            f"MCP server {server}: {tool} did not finish within {limit:g} s (cancelled)"
        )
    parts, truncation = convert_result(result)
    if result.is_error:
        raise McpToolError(f"MCP server {server}: {tool}: {error_text(parts)}")
    return agent_result(server, tool, parts, truncation)


def make_tools(
    config: McpServerConfig, tools: Iterable[mcp_types.Tool], mcp: McpHandle
) -> tuple[list[AgentTool], list[str]]:
    """The agent tools of one server and the problems of those left out (bad schema, a
    name clash after shortening)."""
    made: list[AgentTool] = []
    problems: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        agent_tool = make_tool(config, tool, mcp)
        if agent_tool.name in seen:
            problems.append(
                f"MCP server {config.name}: tool {tool.name} left out: "
                f"its name {agent_tool.name} is taken"
            )
            continue
        try:
            check_definition(agent_tool)
        except ToolError as exc:
            problems.append(f"MCP server {config.name}: tool {tool.name} left out: {exc}")
            continue
        seen.add(agent_tool.name)
        made.append(agent_tool)
    return made, problems
