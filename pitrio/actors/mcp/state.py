"""What the session reports of its MCP servers; light (no ``mcp`` import), for ``get_state``."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pitrio.errors import PitrioError

ServerStatus = Literal["stopped", "starting", "running", "failed", "exited"]
"""``stopped``: not started yet; ``starting``; ``running``; ``failed``: it could not be
started (``error`` says why); ``exited``: it went away (started again on next use)."""


class McpServerError(PitrioError):
    """An MCP server could not be started, went away or is not configured; names it."""


@attrs.frozen
class McpServerState:
    """What ``get_state`` reports of one server (``mcpServers``: a pitrio addition)."""

    name: str
    status: ServerStatus
    tools: tuple[str, ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{name, status, tools, error?}``."""
        data: dict[str, Any] = {"name": self.name, "status": self.status, "tools": list(self.tools)}
        if self.error is not None:
            data["error"] = self.error
        return data
