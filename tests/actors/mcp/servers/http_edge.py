"""A streamable-HTTP MCP server for the tests: ``python http_edge.py PORT_FILE [PORT]``.

Binds PORT on loopback (default: an ephemeral one), listens, then writes it to PORT_FILE;
its ``whoami`` tool answers with the ``Authorization`` header its request carried.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("http-edge")


@server.tool()
async def whoami(ctx: Context) -> str:
    """The Authorization header of this call's HTTP request."""
    headers = ctx.headers or {}
    return f"auth={headers.get('authorization', '')}"


async def main(port_file: Path, port: int) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # Listening before the port file appears: a client that reads the file and connects at
    # once is queued in the backlog until uvicorn accepts (bound but not yet listening, the
    # connect was refused now and then: the test's reconnect failed in a fresh-clone run).
    sock.listen(128)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    serving = uvicorn.Server(config)
    port_file.with_suffix(".tmp").write_text(str(sock.getsockname()[1]))
    port_file.with_suffix(".tmp").rename(port_file)
    await serving.serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
