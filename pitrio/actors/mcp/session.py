"""A session's MCP start: read the configuration, start the actor, list every server's tools.

Called by the session bootstrap before the tool executor starts, so the MCP tools are
registered with the others and appear in the first system prompt. All servers start at once,
each within its own start-up limit; one that fails is a warning (and a ``failed`` status), not
a failed session. Without configured servers nothing MCP-related is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.mcp.config import (
    PROJECT_DIRS,
    McpConfig,
    McpServerConfig,
    cli_config_files,
    limits_from_settings,
    load_mcp_config,
)
from pitrio.actors.mcp.naming import declared_exposure
from pitrio.actors.tool_executor.tool import AgentTool

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import McpHandle

MISSING_PACKAGE = (
    "Warning: MCP servers are configured but the mcp package is not installed "
    "(pip install 'pitrio[mcp]'); their tools are not available"
)


@attrs.frozen
class SessionMcp:
    """What a session gets: the actor's handle (``None``: no servers), tools, warnings."""

    handle: McpHandle | None = None
    tools: tuple[AgentTool, ...] = ()
    notices: tuple[str, ...] = ()


async def start_session_mcp(
    nursery: trio.Nursery,
    *,
    agent_dir: Path,
    cwd: str,
    mcp_settings: Any,
    files: Sequence[str] = (),
    project_trusted: bool = True,
    project_dirs: Sequence[str] = PROJECT_DIRS,
) -> SessionMcp:
    """Start the session's enabled MCP servers in ``nursery``; ``files`` are ``--mcp-config``
    ones (default: the process's command line's). Raises
    :class:`~pitrio.actors.mcp.config.McpConfigError` for a named file that cannot be used."""
    extra = tuple(files) or cli_config_files()
    limits = limits_from_settings(mcp_settings)
    config: McpConfig = await trio.to_thread.run_sync(
        lambda: load_mcp_config(
            agent_dir, cwd, extra, limits, project=project_trusted, project_dirs=project_dirs
        )
    )
    notices = [f"Warning: {problem}" for problem in config.problems]
    servers = config.enabled
    if not servers:
        return SessionMcp(notices=tuple(notices))
    try:
        from pitrio.actors.mcp.actor import start_mcp
        from pitrio.actors.mcp.resources import ResourceTools
        from pitrio.actors.mcp.tools import make_tools
    except ImportError:
        return SessionMcp(notices=(*notices, MISSING_PACKAGE))
    handle = await start_mcp(nursery, servers, cwd=cwd)
    connections = await handle.connect_all()
    tools: list[AgentTool] = []
    owners: dict[str, str] = {}
    with_resources: list[McpServerConfig] = []
    resources_at = 0
    for server in servers:
        outcome = connections[server.name]
        if isinstance(outcome, Exception):
            notices.append(f"Warning: {outcome}")
            continue
        made, problems = make_tools(server, outcome.tools, handle, owners)
        tools.extend(made)
        notices.extend(f"Warning: {problem}" for problem in problems)
        if outcome.has_resources and declared_exposure(server.exposure or "codemode") != "hidden":
            if not with_resources:  # declared where 1.6.0 registers them: after this server's
                resources_at = len(tools)
            with_resources.append(server)
    if with_resources:
        tools[resources_at:resources_at] = ResourceTools(with_resources, handle).tools()
    return SessionMcp(handle=handle, tools=tuple(tools), notices=tuple(notices))
