"""A small stdio MCP server for the MCP interop tests, built with the SDK's ``MCPServer``.

Its tools have names 1.6.0 must rewrite (``get-thing``), two that collide once rewritten
(``a-b``, ``a.b``), one without a description (its title is declared instead), one without
parameters, and two a ``toolExposure`` pattern can hide (``secret_*``). It offers one text
resource, and instructions whose first line is the server's summary.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("names", instructions="Answers questions about things.\nSecond line.")


@server.tool(name="get-thing")
def get_thing(name: str, count: int = 1) -> str:
    """Get a thing by name."""
    return f"{name} x{count}"


@server.tool(name="a-b")
def a_dash_b(text: str) -> str:
    """The dashed one."""
    return f"dash {text}"


@server.tool(name="a.b")
def a_dot_b(text: str) -> str:
    """The dotted one."""
    return f"dot {text}"


@server.tool(name="titled", title="A titled tool")
def titled() -> str:
    return "titled"


@server.tool(name="secret_one")
def secret_one() -> str:
    """Hidden by a pattern."""
    return "one"


@server.tool(name="secret_two")
def secret_two() -> str:
    """Also hidden by a pattern."""
    return "two"


@server.resource("memo://notes", name="notes", mime_type="text/plain")
def notes() -> str:
    """The notes."""
    return "remember the milk"


if __name__ == "__main__":
    server.run("stdio")
