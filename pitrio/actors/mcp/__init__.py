"""Tools from MCP servers (issue 26): configuration, the MCP actor, tools and results.

Only :mod:`pitrio.actors.mcp.config` is imported when a session starts without MCP servers;
the rest needs the ``mcp`` package (``pip install 'pitrio[mcp]'``).
"""
