"""MCP servers for transports: the ``--mcp-config`` flag's argparse action (issue 26)."""

from __future__ import annotations

from pitrio.actors.mcp.config import McpConfigFlag, cli_config_files

__all__ = ["McpConfigFlag", "cli_config_files"]
