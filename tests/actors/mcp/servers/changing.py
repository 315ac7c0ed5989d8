"""An MCP server whose tool list changes while it runs, built with the SDK's ``MCPServer``.

Run as ``python changing.py [GATE]``. ``grow(name)`` adds a tool ``name`` (answering
``grown NAME``), announces ``notifications/tools/list_changed`` and answers only once the
client has asked for the tool list again (an error after 30 s: the client did not);
``shrink(name)`` withdraws it the same way. With ``GATE`` (a FIFO), the server reads a line
from it before it serves, so a test decides when the server's start-up ends: a slow server,
without sleeps.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing", instructions="A server whose tools come and go.")
_listed = [anyio.Event()]
"""Set when the client next asks for the tool list."""
_list_tools = server.list_tools


async def _listing() -> Any:
    _listed[0].set()
    return await _list_tools()


server.list_tools = _listing  # type: ignore[method-assign]


async def _announce(ctx: Context) -> None:
    """Tell the client the tools changed, and wait until it lists them again."""
    _listed[0] = anyio.Event()
    await ctx.session.send_tool_list_changed()
    with anyio.fail_after(30):
        await _listed[0].wait()


def _grown(name: str) -> object:
    def tool() -> str:
        return f"grown {name}"

    return tool


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and tell the client its tools changed."""
    server.add_tool(_grown(name), name=name, description=f"A tool grown as {name}.")  # type: ignore[arg-type]
    await _announce(ctx)
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Withdraw the tool called ``name`` and tell the client its tools changed."""
    server.remove_tool(name)
    await _announce(ctx)
    return f"removed {name}"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as gate:  # blocks until the test opens it for writing
            gate.readline()
    server.run("stdio")
