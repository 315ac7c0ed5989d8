"""MCP tools as agent tools: pi 1.6.0's names and declarations, and one call's life.

A tool is named ``mcp__<server>__<tool>`` (:mod:`.naming`), labelled ``<server>/<tool>`` and
described by its own description, else its title, else a line naming tool and server. The
input schema is the server's, with ``type: object`` and ``properties: {}`` added when missing,
so arguments are converted and checked like the built-in tools' before a call. A tool whose
exposure is ``hidden`` is not made at all. A call asks the MCP actor for the server's live
connection (starting it again if it went away), then calls the tool in the caller's task
within the server's call limit; abort cancels the call, and the SDK tells the server
(``notifications/cancelled``). A failure of the call (a time limit, a lost connection, a
protocol error) is an error naming the server; a result the server marks ``isError`` is an
error result with the server's own content (:mod:`.results`).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

import attrs
import mcp_types
import trio
from mcp import MCPError

from pitrio.actors.mcp.actor import Connection, McpHandle, describe
from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.naming import (
    CALL_TOOL_RESULT_SCHEMA,
    Exposure,
    assign_tool_names,
    declared_exposure,
    mcp_namespace,
    tool_exposure,
)
from pitrio.actors.mcp.results import convert_result
from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.tool_executor.registry import check_definition
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import PitrioError, ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.ostext import check_json_texts


class McpToolError(ToolError):
    """An MCP tool call failed (the server's error, a time limit, a lost connection)."""


def input_schema(tool: mcp_types.Tool) -> dict[str, Any]:
    """The tool's input schema as an object schema (some vendors refuse one without
    ``properties``); its other keywords are kept."""
    schema = dict(tool.input_schema)
    schema["type"] = schema.get("type") or "object"
    schema.setdefault("properties", {})
    return schema


def tool_description(server: str, tool: mcp_types.Tool) -> str:
    """The declared description: the tool's, else its title, else a line naming it."""
    annotations = tool.annotations
    title = tool.title or (annotations.title if annotations is not None else None)
    return (tool.description or "").strip() or title or f"MCP tool {tool.name} of server {server}"


def make_tool(
    config: McpServerConfig, tool: mcp_types.Tool, name: str, mcp: McpHandle
) -> AgentTool:
    """One agent tool, ``name``, calling ``tool`` on the server of ``config``."""
    server, remote = config.name, tool.name

    async def execute(
        tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        connection = await mcp.connect(server)
        return await call_tool(connection, remote, args, config.call_timeout, mcp)

    return AgentTool(
        name=name,
        label=f"{server}/{remote}",
        description=tool_description(server, tool),
        parameters=input_schema(tool),
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
    readable = connection.has_resources
    # Saving a cut result's full text is file I/O: off the event loop.
    return await trio.to_thread.run_sync(
        lambda: convert_result(server, tool, result, readable=readable)
    )


def namespace_of(config: McpServerConfig, instructions: str | None = None) -> dict[str, Any]:
    """A server's tools' namespace (``mcp__<server>``, its description and instructions)."""
    space: dict[str, Any] = {"name": mcp_namespace(config.name)}
    if config.description:
        space["description"] = config.description
    if instructions:
        space["instructions"] = instructions
    return space


def make_tools(
    config: McpServerConfig,
    tools: Iterable[mcp_types.Tool],
    mcp: McpHandle,
    owners: MutableMapping[str, str] | None = None,
) -> tuple[list[tuple[AgentTool, Exposure]], list[str]]:
    """The agent tools of one server that are not hidden, each with how pitrio reaches it
    (:func:`~pitrio.actors.mcp.naming.declared_exposure`), and the problems of those left
    out (a bad schema). ``owners`` (name -> ``<server>\\0<tool>``, shared by the session's
    servers) keeps names unique across servers and is updated."""
    owners = {} if owners is None else owners
    # A name listed twice is one tool: the later listing wins, as a re-registration does in pi.
    listed = list({tool.name: tool for tool in tools}.values())
    names = assign_tool_names(config.name, [tool.name for tool in listed], owners)
    made: list[tuple[AgentTool, Exposure]] = []
    problems: list[str] = []
    for tool in listed:
        name = names[tool.name]
        owners[name] = f"{config.name}\0{tool.name}"
        exposure = declared_exposure(
            tool_exposure(config.exposure, config.tool_exposure, tool.name)
        )
        if exposure == "hidden":
            continue
        agent_tool = make_tool(config, tool, name, mcp)
        try:
            check_definition(agent_tool)
        except ToolError as exc:
            problems.append(f"MCP server {config.name}: tool {tool.name} left out: {exc}")
            continue
        made.append(
            (
                attrs.evolve(
                    agent_tool,
                    exposure=exposure,
                    namespace=namespace_of(config),
                    output_schema=CALL_TOOL_RESULT_SCHEMA,
                ),
                exposure,
            )
        )
    return made, problems
