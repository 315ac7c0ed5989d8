"""An MCP server for the edge cases, built with the SDK's ``MCPServer`` (FastMCP in mcp 1).

Run as ``python edge.py MARKER_DIR``; it writes marker files there so a test can see, from
outside, what happened on the server's side: ``slow-LABEL.started`` when the slow tool begins,
``slow-LABEL.cancelled`` when its call is cancelled (by ``notifications/cancelled``), ``starts``
gets one line per start of the process, ``typed.called`` when ``typed`` ran.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def markers() -> Path:
    """The marker directory the process was started with (read when a tool runs, not at
    import: the tests import this module for :data:`PNG` under pytest's own argv)."""
    return Path(sys.argv[1])


# The smallest valid PNG (1x1, transparent).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("edge")


@server.tool()
async def slow(label: str) -> str:
    """Wait until cancelled (or a minute), noting both on disk."""
    (markers() / f"slow-{label}.started").write_text(label)
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        (markers() / f"slow-{label}.cancelled").write_text(label)
        raise
    return f"slow {label} done"


@server.tool()
def crash(message: str) -> str:
    """Die at once, saying ``message`` on stderr."""
    sys.stderr.write(f"edge server dying: {message}\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def big(lines: int) -> str:
    """``lines`` numbered lines of 100 characters."""
    return "\n".join(f"{n:06d} " + "x" * 93 for n in range(lines))


@server.tool()
def picture() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def typed(count: int, name: str) -> str:
    """Repeat ``name`` ``count`` times."""
    (markers() / "typed.called").write_text(f"{count} {name}")
    return name * count


@server.tool()
def fail() -> str:
    """Always fails with a message."""
    raise ToolError("the edge server refuses")


if __name__ == "__main__":
    with (markers() / "starts").open("a") as starts:
        starts.write(f"{os.getpid()}\n")
    server.run("stdio")
