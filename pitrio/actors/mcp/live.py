"""The session's MCP tools as its servers connect and change (pi 1.6.0's background connect).

pi 1.6.0 connects every enabled server in the background when a session starts: a server's
tools appear once it connects, and again, changed, after it announces
``notifications/tools/list_changed`` (new tools are added, withdrawn ones become
unreachable). :class:`McpToolSet` is that for one session: it reads the MCP actor's
:class:`~pitrio.actors.mcp.actor.ServerUpdate` channel and, for each listing, registers the
server's tools with the tool executor (``direct`` ones active when the tool flags let them
be; the others inactive, for codemode scripts and ``tool_search``), removes the withdrawn
ones, keeps ``tool_search``'s index and the resource tools in step, and renders the
``mcp_servers`` prompt section again with what the server said of itself.

What waits for servers, as 1.6.0's ``before_agent_start`` and ``tool_call`` hooks do: the
session's first prompt waits up to :data:`STARTUP_WAIT` seconds for the servers with
``direct`` tools (:meth:`McpToolSet.wait_for_direct`); ``tool_search`` and the resource tools
wait for every server, a codemode script for the servers it names or, when it discovers
tools, for all (:meth:`McpToolSet.wait_for_reach`). A server counts as ready once its first
start ended: connected with its tools registered, or failed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.naming import (
    DEFAULT_EXPOSURE,
    Exposure,
    declared_exposure,
    mcp_namespace,
)
from pitrio.actors.mcp.prompt import ListedServer, render_servers_section
from pitrio.actors.mcp.search_tool import ToolSearch
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.messages.agent import AgentToolResult

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import Connection, McpHandle, ServerUpdate
    from pitrio.actors.mcp.ranking import SearchDocument
    from pitrio.actors.tool_executor.actor import ToolExecutorHandle

STARTUP_WAIT = 10.0
"""Seconds the first prompt waits for servers with ``direct`` tools (1.6.0's
``DEFAULT_STARTUP_WAIT_MS``)."""
STILL_CONNECTING = "MCP servers are still connecting; their tools become available once connected."
DISCOVERY = re.compile(r"\b(searchTools|describeNamespace|describeTool|ALL_TOOLS)\b")
"""Script globals that reach every tool (1.6.0's ``DISCOVERY_GLOBALS``)."""

Activation = Callable[[str, Exposure], bool | None]
"""Whether a server tool is registered active (``True``), inactive (``False``) or not at all
(``None``): the tool flags' rule, given its name and exposure."""


def script_reach(code: object) -> Literal["all"] | list[str]:
    """The tools a codemode script may call (1.6.0's ``getScriptReach``): every tool when it
    uses a discovery global, else the words of its source."""
    if not isinstance(code, str):
        return []
    return "all" if DISCOVERY.search(code) else re.findall(r"\w+", code)


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
    from pitrio.actors.mcp.ranking import search_document  # a deferred tool's first listing

    namespace = (mcp_namespace(server.name), server.description, connection.instructions)
    return search_document(tool.name, tool.description, tool.parameters, namespace)


def has_direct(server: McpServerConfig) -> bool:
    """Whether some of the server's tools are declared to the model (by its configuration),
    so the first prompt waits for it."""
    return "direct" in listed_server(server, None).exposures(declared_exposure)


def attention(problems: Sequence[str]) -> str:
    """The one warning about the servers' start-up problems."""
    lines = "\n".join(f"  {problem}" for problem in problems)
    return f"MCP servers need attention:\n{lines}"


class McpToolSet:
    """The MCP tools of a session's servers, kept in step with their listings (see the
    module docstring). Only :meth:`run`'s task changes the registrations."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        handle: McpHandle,
        *,
        search: ToolSearch | None,
        activation: Activation,
        loaded: Callable[[], Collection[str]] = frozenset,
        resources: bool = True,
    ) -> None:
        self._servers = {server.name: server for server in servers}
        self._handle = handle
        self._search = search
        self._activation = activation
        self._loaded_from: Callable[[], Collection[str]] | None = loaded
        self._loaded: Collection[str] = ()
        """Tools the transcript declares (an earlier ``tool_search`` loaded them): active
        once their server lists them, as 1.6.0 restores pending names. Read from the
        transcript when a deferred tool is first listed (a resume decodes it only then)."""
        self._listed = {server.name: listed_server(server, None) for server in servers}
        self._connections: dict[str, Connection] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._owners: dict[str, str] = {}
        """Tool name -> ``<server>\\0<tool>``, never forgotten, so names stay stable."""
        self._ready = {server.name: trio.Event() for server in servers}
        self._resources = resources
        """Whether it makes the resource tools (a server an extension registers later has
        none: the start-up set owns them)."""
        self._resource_servers: tuple[str, ...] = ()
        self._resource_tools: tuple[str, ...] = ()
        self._waited = False
        self._section: Callable[[], Awaitable[None]] | None = None
        self._notify: Callable[[str], Awaitable[None]] | None = None
        self._reported = False
        self.problems: list[str] = []
        """Why servers could not be started, in the order they failed."""
        self.applied = 0
        """How many of the actor's updates were applied so far."""
        self._applied = trio.Event()

    # -- what the session reads ----------------------------------------------------------------

    def section(self) -> str | None:
        """The ``mcp_servers`` section as the servers are now (``None``: none listed)."""
        return render_servers_section(list(self._listed.values()), declared_exposure)

    @property
    def listed(self) -> tuple[ListedServer, ...]:
        """The servers as the section lists them."""
        return tuple(self._listed.values())

    @property
    def registered(self) -> tuple[str, ...]:
        """Every tool name it has registered and not withdrawn."""
        names = [name for server in self._names.values() for name in server]
        return (*names, *self._resource_tools)

    @property
    def deferred(self) -> tuple[str, ...]:
        """The tools ``tool_search`` may load now."""
        return () if self._search is None else self._search.names

    def restored(self, loaded: Collection[str]) -> None:
        """The branch now current declares ``loaded``: those still to come are activated
        when their server lists them."""
        self._loaded_from, self._loaded = None, set(loaded)

    def _was_loaded(self, name: str) -> bool:
        if self._loaded_from is not None:
            self._loaded, self._loaded_from = set(self._loaded_from()), None
        return name in self._loaded

    def ready(self, names: Sequence[str] | None = None) -> bool:
        """Whether the first start of every server of ``names`` (all: ``None``) ended."""
        wanted = self._servers if names is None else names
        return all(self._ready[name].is_set() for name in wanted if name in self._ready)

    # -- waiting -------------------------------------------------------------------------------

    async def wait(self, names: Sequence[str] | None = None) -> None:
        """Until the first start of each server of ``names`` (all: ``None``) ended."""
        wanted = list(self._servers) if names is None else names
        for name in wanted:
            event = self._ready.get(name)
            if event is not None:
                await event.wait()

    async def wait_applied(self, count: int) -> None:
        """Until ``count`` updates (connects, failed starts, new listings) were applied."""
        while self.applied < count:
            await self._applied.wait()

    async def wait_for_direct(self, limit: float = STARTUP_WAIT) -> str | None:
        """The first call (the session's first prompt) waits up to ``limit`` seconds for the
        servers with ``direct`` tools; later calls return at once. Returns 1.6.0's notice
        when some were still connecting."""
        if self._waited:
            return None
        self._waited = True
        direct = [name for name, server in self._servers.items() if has_direct(server)]
        with trio.move_on_after(limit):
            await self.wait(direct)
        return None if self.ready(direct) else STILL_CONNECTING

    async def wait_for_reach(self, reach: Literal["all"] | Sequence[str]) -> None:
        """Wait for the servers a call may reach: every one, or those whose namespace one of
        ``reach``'s words contains (1.6.0's ``reachesServer``)."""
        if reach == "all":
            await self.wait()
            return
        await self.wait(
            [name for name in self._servers if any(mcp_namespace(name) in word for word in reach)]
        )

    # -- the task ------------------------------------------------------------------------------

    async def run(
        self,
        updates: trio.MemoryReceiveChannel[ServerUpdate],
        executor: ToolExecutorHandle,
        section: Callable[[], Awaitable[None]],
        notify: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """Apply each update of the MCP actor, until the session ends. ``section`` renders
        the session's ``mcp_servers`` prompt section again when a server's line changed (the
        next prompt declares the change). ``notify`` warns once all servers' first starts
        have ended, when some failed (1.6.0 reports its start-up problems so, once)."""
        self._section, self._notify = section, notify
        async with updates:
            async for update in updates:
                await self._apply(update, executor)

    async def _apply(self, update: ServerUpdate, executor: ToolExecutorHandle) -> None:
        server = self._servers.get(update.name)
        if server is None:
            return
        connection = update.connection
        if update.closed:
            await self._forget(server, executor)
        elif connection is None:
            if not self._ready[update.name].is_set():
                self.problems.append(update.error or f"MCP server {update.name} failed")
        else:
            self._connections[server.name] = connection
            await self._register(server, connection, executor)
            if self._resources:
                await self._sync_resources(executor)
            before = self.section()
            self._listed[server.name] = listed_server(server, connection)
            if self._section is not None and self.section() != before:
                await self._section()
        self._ready[update.name].set()
        self.applied += 1
        self._applied.set()
        self._applied = trio.Event()
        if not self._reported and self.ready():
            self._reported = True
            if self.problems and self._notify is not None:
                await self._notify(attention(self.problems))

    async def wait_closed(self, name: str) -> None:
        """Until server ``name`` is no longer in the set (its closed update was applied)."""
        while name in self._servers:
            await self._applied.wait()

    async def _forget(self, server: McpServerConfig, executor: ToolExecutorHandle) -> None:
        """Server ``server`` was closed for good: its tools leave the executor and
        ``tool_search``, its line the section; later updates of its name are ignored."""
        names = self._names.pop(server.name, ())
        if names:
            await executor.unregister(list(names))
        if self._search is not None:
            self._search.remove(names)
        del self._servers[server.name]
        self._connections.pop(server.name, None)
        if self._resources:
            await self._sync_resources(executor)
        before = self.section()
        self._listed.pop(server.name, None)
        if self._section is not None and self.section() != before:
            await self._section()

    async def _register(
        self, server: McpServerConfig, connection: Connection, executor: ToolExecutorHandle
    ) -> None:
        from pitrio.actors.mcp.tools import make_tools, namespace_of

        made, problems = make_tools(server, connection.tools, self._handle, self._owners)
        self.problems.extend(problems)
        space = namespace_of(server, connection.instructions)
        previous = set(self._names.get(server.name, ()))
        fresh: list[AgentTool] = []
        kept: list[AgentTool] = []
        documents: dict[str, SearchDocument] = {}
        for tool, exposure in made:
            active = self._activation(tool.name, exposure)
            if active is None:
                continue
            tool = attrs.evolve(tool, namespace=space)
            if exposure == "deferred":
                documents[tool.name] = tool_document(tool, server, connection)
                active = active or self._was_loaded(tool.name)
            # A tool listed before keeps its state (a search may have loaded it).
            (fresh if active and tool.name not in previous else kept).append(tool)
        names = await executor.register(*fresh)
        names += await executor.register(*kept, activate=False)
        gone = previous - set(names)
        if gone:  # withdrawn: unreachable from now on
            await executor.unregister(sorted(gone))
        if self._search is not None:
            self._search.remove(gone)
            self._search.add(documents)
        self._names[server.name] = names

    async def _sync_resources(self, executor: ToolExecutorHandle) -> None:
        """The resource tools over the connected servers that offer resources, with the
        widest of their exposures (1.6.0: direct, codemode, deferred); none without them."""
        from pitrio.actors.mcp.resources import ResourceTools

        servers = [
            server
            for name, server in self._servers.items()
            if name in self._connections
            and self._connections[name].has_resources
            and declared_exposure(server.exposure or DEFAULT_EXPOSURE) != "hidden"
        ]
        key = tuple(server.name for server in servers)
        if key == self._resource_servers:
            return
        self._resource_servers = key
        if self._search is not None:
            self._search.remove(self._resource_tools)
        if not servers:
            await executor.unregister(self._resource_tools)
            self._resource_tools = ()
            return
        exposures = {declared_exposure(s.exposure or DEFAULT_EXPOSURE) for s in servers}
        widest = next(e for e in ("direct", "codemode", "deferred") if e in exposures)
        tools = [
            attrs.evolve(tool, exposure=widest, execute=self._waiting(tool))
            for tool in ResourceTools(servers, self._handle).tools()
        ]
        wanted = {tool.name: self._activation(tool.name, widest) for tool in tools}
        first = not self._resource_tools
        names = await executor.register(*(t for t in tools if first and wanted[t.name]))
        names += await executor.register(
            *(t for t in tools if wanted[t.name] is False or (wanted[t.name] and not first)),
            activate=False,
        )
        self._resource_tools = names
        if widest == "deferred" and self._search is not None:
            from pitrio.actors.mcp.ranking import search_document

            self._search.add(
                {t.name: search_document(t.name, t.description, t.parameters) for t in tools}
            )

    def _waiting(self, tool: AgentTool) -> Any:
        """``tool``'s body, after every server's first start (the resource tools reach them
        all, so 1.6.0 waits for all)."""
        execute = tool.execute

        async def run(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
            await self.wait()
            return await execute(call_id, args, on_update)

        return run


__all__ = [
    "STARTUP_WAIT",
    "STILL_CONNECTING",
    "McpToolSet",
    "has_direct",
    "listed_server",
    "script_reach",
    "tool_document",
]
