"""A session's MCP start: read the configuration, start the actor, list every server's tools.

Called by the session bootstrap before the tool executor starts, so the MCP tools are
registered with the others and appear in the first system prompt. All servers start at once,
each within its own start-up limit; one that fails is a warning (and a ``failed`` status), not
a failed session. Without configured servers nothing MCP-related is imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
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
from pitrio.actors.mcp.naming import (
    DEFAULT_EXPOSURE,
    Exposure,
    declared_exposure,
    mcp_namespace,
)
from pitrio.actors.mcp.prompt import ListedServer, render_servers_section
from pitrio.actors.mcp.ranking import SearchDocument, rank, search_document
from pitrio.actors.mcp.search_tool import ToolSearch, restore_loaded, with_loaded
from pitrio.actors.tool_executor.actor import ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool
from pitrio.messages.agent import AgentMessage

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import McpHandle

MISSING_PACKAGE = (
    "Warning: MCP servers are configured but the mcp package is not installed "
    "(pip install 'pitrio[mcp]'); their tools are not available"
)


@attrs.frozen
class SessionMcp:
    """What a session gets: the actor's handle (``None``: no servers), the MCP tools (and
    ``tool_search`` when a server has deferred tools), warnings, the ``mcp_servers`` prompt
    section."""

    handle: McpHandle | None = None
    tools: tuple[AgentTool, ...] = ()
    """The MCP tools, deferred ones included, in declaration order."""
    notices: tuple[str, ...] = ()
    search: ToolSearch | None = None
    """``tool_search`` over the deferred tools, when a server's exposure asks for it."""
    section: str | None = None
    """The ``mcp_servers`` section's text (without its tag), when a server is listed."""
    wants_codemode: bool = False
    """An enabled server's configured exposures include ``codemode``: 1.6.0 activates the
    ``codemode`` tool for it unless ``autoEnableCodemode`` is false."""
    auto_enable_codemode: bool = True
    listed: tuple[ListedServer, ...] = ()
    """The enabled servers as the ``mcp_servers`` section lists them (servers an extension
    registers later are listed beside them)."""
    server_names: tuple[str, ...] = ()
    """Every configured server's name (a later registration of one of them is not started:
    ``mcp.json`` wins, as at start-up)."""
    from_extensions: tuple[str, ...] = ()
    """The started servers an extension registered during ``setup`` (no file's server of the
    same name replaced them): unregistering one closes it."""

    @property
    def script_only(self) -> tuple[str, ...]:
        """The MCP tools of ``codemode`` exposure: registered, callable from scripts, never
        declared unless an ``mcp__`` entry of ``--tools`` names them."""
        return tuple(tool.name for tool in self.tools if tool.exposure == "codemode")

    @property
    def deferred(self) -> tuple[str, ...]:
        """The tools registered inactive, for ``tool_search`` to load."""
        return () if self.search is None else self.search.names

    def active_with_loaded(
        self, active: Sequence[str], messages: Iterable[AgentMessage]
    ) -> list[str]:
        """``active`` without the deferred tools, then those an earlier search on this
        branch loaded (the transcript declares them): a resumed session keeps them."""
        return with_loaded(active, messages, self.deferred)

    def restorer(
        self, executor: ToolExecutorHandle
    ) -> Callable[[Sequence[AgentMessage]], Awaitable[None]] | None:
        """What restores the loaded tools after a move in the tree (``None``: no search)."""
        if self.search is None:
            return None
        deferred = self.deferred

        async def restore(messages: Sequence[AgentMessage]) -> None:
            await restore_loaded(executor, deferred, messages)

        return restore


def listed_server(server: McpServerConfig, connection: Any) -> ListedServer:
    """How the ``mcp_servers`` section lists ``server`` (``connection``: its live connection,
    for what it said of itself, or ``None``)."""
    return ListedServer(
        name=server.name,
        exposure=server.exposure,
        tool_exposures=tuple(exposure for _tool, exposure in server.tool_exposure),
        description=server.description,
        instructions=getattr(connection, "instructions", None),
    )


def tool_document(tool: AgentTool, server: McpServerConfig, connection: Any) -> SearchDocument:
    """What ``tool_search`` reads of a deferred tool of ``server`` (its namespace included)."""
    namespace = (mcp_namespace(server.name), server.description, connection.instructions)
    return search_document(tool.name, tool.description, tool.parameters, namespace)


async def start_session_mcp(
    nursery: trio.Nursery,
    *,
    agent_dir: Path,
    cwd: str,
    mcp_settings: Any,
    files: Sequence[str] = (),
    project_trusted: bool = True,
    project_dirs: Sequence[str] = PROJECT_DIRS,
    client: tuple[Any, str] | None = None,
    registered: tuple[Any, str] | None = None,
) -> SessionMcp:
    """Start the session's enabled MCP servers in ``nursery``; ``files`` are ``--mcp-config``
    ones (default: the process's command line's); ``client``: a client's servers, as
    :func:`~pitrio.actors.mcp.config.load_mcp_config` takes them. Raises
    :class:`~pitrio.actors.mcp.config.McpConfigError` for a named file that cannot be used."""
    extra = tuple(files) or cli_config_files()
    limits = limits_from_settings(mcp_settings)
    config: McpConfig = await trio.to_thread.run_sync(
        lambda: load_mcp_config(
            agent_dir,
            cwd,
            extra,
            limits,
            project=project_trusted,
            project_dirs=project_dirs,
            client=client,
            registered=registered,
        )
    )
    notices = [f"Warning: {problem}" for problem in config.problems]
    servers = config.enabled
    if not servers:
        names = tuple(server.name for server in config.servers)
        return SessionMcp(notices=tuple(notices), server_names=names)
    try:
        from pitrio.actors.mcp.actor import start_mcp
        from pitrio.actors.mcp.resources import ResourceTools
        from pitrio.actors.mcp.tools import make_tools, namespace_of
    except ImportError:
        return SessionMcp(notices=(*notices, MISSING_PACKAGE))
    handle = await start_mcp(nursery, servers, cwd=cwd)
    connections = await handle.connect_all()
    tools: list[AgentTool] = []
    owners: dict[str, str] = {}
    documents: dict[str, SearchDocument] = {}
    with_resources: list[tuple[McpServerConfig, Exposure]] = []
    resources_at = 0
    for server in servers:
        outcome = connections[server.name]
        if isinstance(outcome, Exception):
            notices.append(f"Warning: {outcome}")
            continue
        made, problems = make_tools(server, outcome.tools, handle, owners)
        notices.extend(f"Warning: {problem}" for problem in problems)
        space = namespace_of(server, outcome.instructions)
        for tool, exposure in made:
            tool = attrs.evolve(tool, namespace=space)
            tools.append(tool)
            if exposure == "deferred":
                documents[tool.name] = tool_document(tool, server, outcome)
        exposure = declared_exposure(server.exposure or DEFAULT_EXPOSURE)
        if outcome.has_resources and exposure != "hidden":
            if not with_resources:  # declared where 1.6.0 registers them: after this server's
                resources_at = len(tools)
            with_resources.append((server, exposure))
    if with_resources:
        made_resources = ResourceTools([server for server, _ in with_resources], handle).tools()
        # The widest exposure of the servers they reach (1.6.0): direct, codemode, deferred.
        reach = {exposure for _, exposure in with_resources}
        widest = next(e for e in ("direct", "codemode", "deferred") if e in reach)
        made_resources = [attrs.evolve(tool, exposure=widest) for tool in made_resources]
        tools[resources_at:resources_at] = made_resources
        # The widest exposure of the servers they reach (1.6.0): direct, else deferred.
        if all(exposure == "deferred" for _, exposure in with_resources):
            for tool in made_resources:
                documents[tool.name] = search_document(tool.name, tool.description, tool.parameters)
    # tool_search is made from the configuration, as 1.6.0 activates it before connecting.
    wants_search = any(
        "deferred" in listed_server(server, None).exposures(declared_exposure) for server in servers
    )
    search = ToolSearch(documents) if wants_search else None
    listed = tuple(listed_server(server, connections[server.name]) for server in servers)
    section = render_servers_section(listed, declared_exposure)
    wants_codemode = any(
        "codemode" in listed_server(server, None).exposures(declared_exposure) for server in servers
    )
    return SessionMcp(
        handle=handle,
        tools=tuple(tools),
        notices=tuple(notices),
        search=search,
        section=section,
        wants_codemode=wants_codemode,
        auto_enable_codemode=config.auto_enable_codemode is not False,
        listed=listed,
        server_names=tuple(server.name for server in config.servers),
        from_extensions=tuple(
            server.name
            for server in servers
            if registered is not None and server.source == registered[1]
        ),
    )


def rank_tools(query: str, tools: Sequence[AgentTool], limit: int) -> list[str]:
    """Codemode's ``searchTools``: ``tools`` ranked for ``query`` as ``tool_search`` ranks
    (1.6.0's BM25 over names, descriptions, parameters and namespaces), best first."""
    documents = [
        search_document(
            tool.name,
            tool.description,
            tool.parameters,
            None
            if tool.namespace is None
            else (
                str(tool.namespace.get("name", "")),
                tool.namespace.get("description"),
                tool.namespace.get("instructions"),
            ),
        )
        for tool in tools
    ]
    return [name for name, _score in rank(query, documents, limit)]
