"""MCP servers an extension registers after start-up (pi 1.6.0: "servers registered later
connect right away, and ``unregisterMcpServer()`` closes the connection and makes the
server's tools unreachable").

Each such server gets its own MCP actor in a cancel scope of the session's nursery, so
closing it is cancelling that scope (the actor ends its connection task, which ends the
server process or HTTP session); its tools are registered with the session's tool executor
(``direct`` ones active) and removed again on close, and the ``mcp_servers`` prompt section
is rendered again over the start-up servers and these. :meth:`LateMcpServers.sync` brings
the running set to the registrations as they are when it runs, under a lock, so calls made
in any order converge on the latest registrations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from pitrio.actors.mcp.config import McpServerConfig, parse_file
from pitrio.actors.mcp.live import listed_server, tool_document
from pitrio.actors.mcp.naming import declared_exposure
from pitrio.actors.mcp.prompt import SECTION, ListedServer, render_servers_section
from pitrio.actors.mcp.search_tool import ToolSearch
from pitrio.actors.mcp.state import McpServerState

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.events import RegisteredMcpServer
    from pitrio.actors.tool_executor import ToolExecutorHandle


class _Sections(Protocol):
    async def set_prompt_section(self, name: str, text: str | None) -> None:
        """Replace (``None``: remove) one of the session's prompt sections."""
        ...


class _Reports(Protocol):
    def report(self, path: str, event: str, error: BaseException | str) -> None:
        """Send an ``extension_error`` for ``path`` / ``event``."""
        ...


class SessionPort(Protocol):
    """What late servers need of the session: ``extensions.api.SessionPort`` has it (named
    here so that the API can import this module without a circle)."""

    @property
    def session(self) -> _Sections:
        """The session's handle."""
        ...

    @property
    def runner(self) -> _Reports:
        """The extensions' runner (reports their errors)."""
        ...

    @property
    def tools(self) -> ToolExecutorHandle:
        """The session's tool executor."""
        ...

    @property
    def nursery(self) -> trio.Nursery:
        """Where a late server's MCP actor runs."""
        ...

    @property
    def cwd(self) -> str:
        """The session's working directory."""
        ...


SOURCE = "servers registered by extensions"


@attrs.define
class _Running:
    """A server started after start-up: its entry, what closes it, its tools."""

    config: dict[str, Any]
    scope: trio.CancelScope
    done: trio.Event
    handle: Any
    """The server's MCP actor's handle (its state for ``get_state``)."""
    tools: tuple[str, ...] = ()
    listed: ListedServer | None = None


class LateMcpServers:
    """The session's servers registered after start-up (see the module docstring)."""

    def __init__(
        self,
        *,
        started: tuple[str, ...],
        listed: Callable[[], tuple[ListedServer, ...]],
        search: ToolSearch | None = None,
    ) -> None:
        self._started = set(started)
        self._listed = listed
        """The start-up servers as the prompt section lists them now (they connect in the
        background, and say more of themselves once connected)."""
        self._search = search
        """``tool_search`` of the session (made here, and registered, for the first late
        server with deferred tools when the session started without one)."""
        self._running: dict[str, _Running] = {}
        self._lock = trio.Lock()

    def states(self) -> tuple[McpServerState, ...]:
        """The open servers' states (``get_state``'s ``mcpServers``), in start order."""
        found = (r.handle.state_of(name) for name, r in self._running.items())
        return tuple(state for state in found if state is not None)

    @property
    def running(self) -> tuple[str, ...]:
        """The names of the servers started after start-up that are still open."""
        return tuple(self._running)

    async def sync(self, port: SessionPort, servers: Mapping[str, RegisteredMcpServer]) -> None:
        """Close the servers no longer registered (or registered anew), start the new ones,
        then render the prompt section again. ``servers`` is read under the lock: the
        registrations as they are then."""
        async with self._lock:
            for name in list(self._running):
                current = servers.get(name)
                if current is None or current.config != self._running[name].config:
                    await self._close(port, name)
            for name, registration in list(servers.items()):
                if name not in self._started and name not in self._running:
                    await self._open(port, registration)
            await port.session.set_prompt_section(SECTION, self.section())

    def section(self) -> str | None:
        """The ``mcp_servers`` section over the start-up servers and these."""
        listed = [*self._listed(), *(r.listed for r in self._running.values() if r.listed)]
        return render_servers_section(listed, declared_exposure)

    async def _open(self, port: SessionPort, registration: RegisteredMcpServer) -> None:
        config = parse_file({"mcpServers": {registration.name: registration.config}}, SOURCE)
        enabled = [server for server in config.servers if server.enabled]
        if not enabled:
            return
        server = enabled[0]
        try:
            from pitrio.actors.mcp.actor import start_mcp
            from pitrio.actors.mcp.tools import make_tools, namespace_of
        except ImportError:
            self._report(port, registration, "the mcp package is not installed")
            return
        done = trio.Event()
        scope, handle = await port.nursery.start(_serve, start_mcp, server, port.cwd, done)
        running = _Running(config=dict(registration.config), scope=scope, done=done, handle=handle)
        self._running[server.name] = running
        outcome = (await handle.connect_all())[server.name]
        if isinstance(outcome, Exception):
            self._report(port, registration, str(outcome))
            return
        made, problems = make_tools(server, outcome.tools, handle, {})
        for problem in problems:
            self._report(port, registration, problem)
        space = namespace_of(server, outcome.instructions)
        tools = [(attrs.evolve(tool, namespace=space), exposure) for tool, exposure in made]
        names = await port.tools.register(*(t for t, e in tools if e == "direct"))
        names += await port.tools.register(*(t for t, e in tools if e != "direct"), activate=False)
        running.tools = names
        deferred = {t.name: tool_document(t, server, outcome) for t, e in tools if e == "deferred"}
        if deferred:
            await self._searchable(port, deferred)
        running.listed = listed_server(server, outcome)

    async def _searchable(self, port: SessionPort, documents: dict[str, Any]) -> None:
        """Put deferred tools in ``tool_search``'s index, making and activating the tool when
        the session has none."""
        if self._search is None:
            self._search = ToolSearch({})
            tools = port.tools
            self._search.attach(lambda: tools)
            await port.tools.register(self._search.tool())
        self._search.add(documents)

    async def _close(self, port: SessionPort, name: str) -> None:
        running = self._running.pop(name)
        if self._search is not None:
            self._search.remove(running.tools)
        await port.tools.unregister(running.tools)
        running.scope.cancel()
        await running.done.wait()  # the connection and the server process are gone

    @staticmethod
    def _report(port: SessionPort, registration: RegisteredMcpServer, problem: str) -> None:
        port.runner.report(
            registration.extension_path,
            "register_mcp_server",
            f'MCP server "{registration.name}": {problem}',
        )


async def _serve(
    start_mcp: Any,
    server: McpServerConfig,
    cwd: str,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[tuple[trio.CancelScope, Any]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """One server's MCP actor, until its scope is cancelled (the server is closed with it);
    ``done`` is set once it has ended."""
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                handle = await start_mcp(nursery, [server], cwd=cwd)
                task_status.started((scope, handle))
    finally:
        done.set()


__all__ = ["LateMcpServers"]
