"""A session's MCP start: read the configuration and start the actor, without waiting.

Called by the session bootstrap before the tool executor starts. As pi 1.6.0, the servers
connect in the background: the session starts (and answers ``get_state``) at once, and each
server's tools are registered when it connects (:mod:`.live`), which the first prompt waits
for only for servers with ``direct`` tools. A server that fails is a ``failed`` status and a
problem of the tool set, not a failed session. Without configured servers nothing
MCP-related is imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.mcp.config import (
    PROJECT_DIRS,
    McpConfig,
    cli_config_files,
    limits_from_settings,
    load_mcp_config,
)
from pitrio.actors.mcp.live import Activation, McpToolSet, listed_server
from pitrio.actors.mcp.naming import declared_exposure
from pitrio.actors.mcp.prompt import ListedServer
from pitrio.actors.mcp.search_tool import ToolSearch, declared_tools, restore_loaded
from pitrio.actors.tool_executor.actor import ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool
from pitrio.messages.agent import AgentMessage

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import McpHandle

UPDATES = 32
"""Capacity of the MCP actor's update channel."""

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
    live: McpToolSet | None = None
    """The tool set that registers the servers' tools as they connect (``None``: no
    servers); :meth:`start` runs it."""
    updates: Any = None
    """The actor's update channel's receiving end, for :meth:`start`."""
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
    def deferred(self) -> tuple[str, ...]:
        """The tools registered inactive, for ``tool_search`` to load."""
        return () if self.live is None else self.live.deferred

    def now_listed(self) -> tuple[ListedServer, ...]:
        """The servers as the ``mcp_servers`` section lists them now."""
        return self.listed if self.live is None else self.live.listed

    def section_now(self) -> str | None:
        """The ``mcp_servers`` section as the servers are now."""
        return self.section if self.live is None else self.live.section()

    async def start(
        self,
        nursery: trio.Nursery,
        executor: ToolExecutorHandle,
        section: Callable[[], Awaitable[None]],
        notify: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """Run the tool set in ``nursery`` once the executor runs (tools are registered as
        their servers connect; ``section`` renders the session's ``mcp_servers`` section
        again; ``notify`` warns of servers that failed to start)."""
        if self.live is not None:
            nursery.start_soon(self.live.run, self.updates, executor, section, notify)

    def restorer(
        self, executor: ToolExecutorHandle
    ) -> Callable[[Sequence[AgentMessage]], Awaitable[None]] | None:
        """What restores the loaded tools after a move in the tree (``None``: no search)."""
        if self.search is None:
            return None
        live = self.live

        async def restore(messages: Sequence[AgentMessage]) -> None:
            if live is not None:
                live.restored(declared_tools(messages))
            await restore_loaded(executor, self.deferred, messages)

        return restore


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
    activation: Activation = lambda _name, exposure: exposure == "direct",
    loaded: Callable[[], Collection[str]] = frozenset,
) -> SessionMcp:
    """Start the session's enabled MCP servers in ``nursery``; ``files`` are ``--mcp-config``
    ones (default: the process's command line's); ``client``: a client's servers, as
    :func:`~pitrio.actors.mcp.config.load_mcp_config` takes them; ``activation``: the tool
    flags' rule for each server tool (:data:`~pitrio.actors.mcp.live.Activation`);
    ``loaded``: the tools the transcript declares (a resumed session's earlier searches).
    Raises
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
    except ImportError:
        return SessionMcp(notices=(*notices, MISSING_PACKAGE))
    # Bounded: a server's connection task waits while the tool set is busy (backpressure
    # on that server only); the tool set reads it for the session's life.
    send, receive = trio.open_memory_channel[Any](UPDATES)
    handle = await start_mcp(nursery, servers, cwd=cwd, updates=send)
    nursery.start_soon(_connect_all, handle)
    # tool_search is made from the configuration, as 1.6.0 activates it before connecting.
    wants_search = any(
        "deferred" in listed_server(server, None).exposures(declared_exposure) for server in servers
    )
    search = ToolSearch({}) if wants_search else None
    live = McpToolSet(servers, handle, search=search, activation=activation, loaded=loaded)
    wants_codemode = any(
        "codemode" in listed_server(server, None).exposures(declared_exposure) for server in servers
    )
    return SessionMcp(
        handle=handle,
        live=live,
        updates=receive,
        notices=tuple(notices),
        search=search,
        section=live.section(),
        wants_codemode=wants_codemode,
        auto_enable_codemode=config.auto_enable_codemode is not False,
        listed=live.listed,
        server_names=tuple(server.name for server in config.servers),
        from_extensions=tuple(
            server.name
            for server in servers
            if registered is not None and server.source == registered[1]
        ),
    )


async def _connect_all(handle: McpHandle) -> None:
    """Start every server (their outcomes reach the tool set through the actor's updates)."""
    await handle.connect_all()


def rank_tools(query: str, tools: Sequence[AgentTool], limit: int) -> list[str]:
    """Codemode's ``searchTools``: ``tools`` ranked for ``query`` as ``tool_search`` ranks
    (1.6.0's BM25 over names, descriptions, parameters and namespaces), best first."""
    # Imported by the first search: a session without MCP tools never ranks (issue 38).
    from pitrio.actors.mcp.ranking import rank, search_document

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
